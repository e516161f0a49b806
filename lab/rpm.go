package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// The lab's proof against the real protocol's server: the reference
// responsiveness server (network-quality-server's nginx setup, Debian's
// nginx) in the server namespace, beside sqmkit serve on the same path.

// rpmResult is what a scenario of rpm mode measured beside its grade
// (result.Test, `sqmkit test URL` against the reference server).
type rpmResult struct {
	URL string `json:"url"`
	// Own is `sqmkit test` against sqmkit serve on the same path, graded
	// the same way; its files are under the scenario's sqmkit-serve/.
	Own *accept.Measurement `json:"sqmkit_serve"`
	// RPM per direction (download, upload): goresponsiveness's; sqmkit
	// test --rpm's, the draft's current aggregation; and sqmkit's
	// latencies aggregated as goresponsiveness does (the earlier text).
	// 0: no figure (its NaN, which JSON cannot hold: setTheirs).
	Goresponsiveness [2]float64 `json:"goresponsiveness_rpm"`
	// GoresponsivenessConns is how many load connections it ended with
	// per direction; 0: its load generator gave up, and its RPM is of an
	// unloaded link. SqmkitConns: sqmkit's, held to at most those
	// (refserver.Compare).
	GoresponsivenessConns [2]int `json:"goresponsiveness_connections"`
	// The probe rounds goresponsiveness started in its final window per
	// direction, and how many of them it kept (refserver.Theirs).
	GoresponsivenessRounds [2]int     `json:"goresponsiveness_final_window_rounds"`
	GoresponsivenessKept   [2]int     `json:"goresponsiveness_final_window_kept"`
	Sqmkit                 [2]float64 `json:"sqmkit_rpm"`
	SqmkitEarlier          [2]float64 `json:"sqmkit_rpm_earlier_draft"`
	SqmkitConns            [2]int     `json:"sqmkit_connections"`
	// Each client's two halves per direction, ms: a foreign probe per
	// round trip and a loaded GET (goresponsiveness's from its probe
	// logs, 0 without them), its goodput, and the rule each direction was
	// judged by (yardstick).
	GoresponsivenessForeign [2]float64 `json:"goresponsiveness_foreign_ms"`
	GoresponsivenessLoaded  [2]float64 `json:"goresponsiveness_loaded_ms"`
	GoresponsivenessMbps    [2]float64 `json:"goresponsiveness_mbps"`
	SqmkitForeign           [2]float64 `json:"sqmkit_foreign_ms"`
	SqmkitLoaded            [2]float64 `json:"sqmkit_loaded_ms"`
	Rule                    [2]string  `json:"rule"`
	// With a shaper: sqmkit tune's rates (download, upload, kbit/s)
	// against sqmkit serve and against the reference server's URL.
	TuneServe *[2]int `json:"tune_serve_kbit,omitempty"`
	TuneURL   *[2]int `json:"tune_url_kbit,omitempty"`
}

// rpmTuneBand is how close tune's rates against the reference server must
// land to its rates against sqmkit serve (issue #52); refserver.Band is
// how close sqmkit's RPM to goresponsiveness's.
const rpmTuneBand = 0.05

// refServer starts the reference responsiveness server in the server
// namespace, once per lab: nginx, and `sqmkit serve --rpm` on the
// namespace's loopback as the backend of its /slurp. It returns the
// server's config URL.
func (t *topo) refServer(sqmkit string) (string, error) {
	if t.refURL != "" {
		return t.refURL, nil
	}
	dir := t.refDir()
	url, err := refserver.Write(dir, serverIP, rpmBackend)
	if err != nil {
		return "", err
	}
	if err := t.nginx(sqmkit, dir, "nginx.log"); err != nil {
		return "", err
	}
	t.refURL = url
	return url, nil
}

// publicServer starts the reference server as the public default in the
// server namespace, on port 443 beside refServer's, once per lab
// (refserver.WritePublic): a client that resolves its host to serverIP
// and trusts its CA (the OpenWrt router's /etc, refserver.Confined on the
// client) takes it for the public server.
func (t *topo) publicServer(sqmkit string) (*refserver.Public, error) {
	if t.public != nil {
		return t.public, nil
	}
	dir := filepath.Join(t.dir, "public")
	p, err := refserver.WritePublic(dir, serverIP, rpmBackend)
	if err != nil {
		return nil, err
	}
	if err := t.nginx(sqmkit, dir, "nginx-public.log"); err != nil {
		return nil, err
	}
	t.public = &p
	return t.public, nil
}

// rpmBackend is where `sqmkit serve --rpm` sinks the nginx setups' /slurp.
const rpmBackend = "127.0.0.1:4043"

// nginx runs nginx on dir's layout in the server namespace, the backend
// of its /slurp first (once per lab).
func (t *topo) nginx(sqmkit, dir, log string) error {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		return fmt.Errorf("nginx is not installed (scripts/deps.sh installs it): %w", err)
	}
	if !t.backend {
		backend, err := t.sh.daemon(nsServer, filepath.Join(t.logs, "rpm-backend.log"), sqmkit, "serve", "--listen", "127.0.0.1:8694", "--rpm", rpmBackend)
		if err != nil {
			return err
		}
		t.procs, t.backend = append(t.procs, backend), true
	}
	ng, err := t.sh.daemon(nsServer, filepath.Join(t.logs, log), refserver.Command(nginx, dir)...)
	if err != nil {
		return err
	}
	ng.term = true
	t.procs = append(t.procs, ng)
	time.Sleep(time.Second)
	return refserver.Failed(dir)
}

// refDir is where refServer lays the reference server out, on the guest's tmpfs.
func (t *topo) refDir() string { return filepath.Join(t.dir, "refserver") }

// rpmScenario grades the path (unshaped, or with the backend at the lab's
// 95 % rates) with `sqmkit test URL` against the reference server and
// with `sqmkit test` against sqmkit serve, each through the noise gate,
// and wants the same letters; measures the RPM with goresponsiveness and
// `sqmkit test --rpm URL`; with a shaper, runs `sqmkit tune` (the router
// build, from the router) against each server and wants the rates within
// rpmTuneBand.
func (g *guest) rpmScenario(t *topo, name string, r *result) error {
	url, err := t.refServer(g.tools.sqmkit)
	if err != nil {
		return err
	}
	defer func() {
		os.WriteFile(filepath.Join(r.Dir, "nginx-error.log"), []byte(refserver.Log(t.refDir())), 0o644)
	}()
	shaped := name != unshaped
	var sh *shell
	var sq, root, dev string
	if shaped {
		s, bin, sc, err := g.startTuned(t, name, r)
		if err != nil {
			return err
		}
		sh, sq, root, dev = s, bin, sc.root, sc.dev
		defer sh.run(nsRouter, sq, "stop", "--root", root)
	}
	rr := &rpmResult{URL: url}
	r.RPM = rr
	// a grade the host kept from measuring is inconclusive, but the RPM and
	// the tunes do not depend on it: they still run, and their checks are
	// kept beside that verdict (the first grade's); any other error ends
	// the scenario
	var busy error
	graded := func(against string, err error) error {
		if err == nil {
			return nil
		}
		err = fmt.Errorf("against %s: %w", against, err)
		var inc *inconclusive
		if !errors.As(err, &inc) {
			return err
		}
		if busy == nil {
			busy = err
		}
		return nil
	}
	own := result{Dir: filepath.Join(r.Dir, "sqmkit-serve"), DownKbit: r.DownKbit}
	os.MkdirAll(own.Dir, 0o755)
	if err := graded("sqmkit serve", g.grade(t, &own, shaped)); err != nil {
		return err
	}
	rr.Own = own.Test
	t.target = []string{url, "--rpm-insecure"}
	m, discarded, err := g.cleanTest(t, r.Dir, own.DownKbit)
	t.target = nil
	r.Discarded = append(own.Discarded, discarded...)
	if err := graded("the reference server", err); err != nil {
		return err
	}
	r.Test = &m
	if busy == nil {
		r.Checks = sameLetters(m, *own.Test)
		if p, q := m.Phase(accept.Bidir), own.Test.Phase(accept.Bidir); p != nil && q != nil {
			g.say("%s/%s: bidirectional, not checked (sameLetters): reference server %s (+%.1f ms), sqmkit serve %s (+%.1f ms)",
				t.p.Name, r.Backend, bbresult.Grade(p.AddedMean), p.AddedMean, bbresult.Grade(q.AddedMean), q.AddedMean)
		}
	}

	// a client that measured nothing fails its checks, not the tunes after it
	if err := g.rpmFigures(t, r.Dir, url, rr); err != nil {
		why, _, _ := strings.Cut(err.Error(), "\n") // the output is in the logs
		g.say("%s/%s: %s", t.p.Name, r.Backend, why)
		r.Checks = append(r.Checks, accept.Check{Name: "RPM measured: " + why, Want: "both clients, both directions"})
	} else {
		r.Checks = append(r.Checks, rpmChecks(rr, shaped)...)
		for i, dir := range []string{"download", "upload"} {
			g.say("%s/%s: %s RPM judged by the %s", t.p.Name, r.Backend, dir, rr.Rule[i])
		}
	}

	if shaped {
		serve, err := g.tuneAgainst(sh, sq, root, dev, r.Dir, "serve", "-4", serverIP)
		if err != nil {
			return err
		}
		ref, err := g.tuneAgainst(sh, sq, root, dev, r.Dir, "url", "--rpm-insecure", "--server", url)
		if err != nil {
			return err
		}
		rr.TuneServe = &[2]int{serve.Search.Download.RateKbit, serve.Search.Upload.RateKbit}
		rr.TuneURL = &[2]int{ref.Search.Download.RateKbit, ref.Search.Upload.RateKbit}
		cs, err := g.tuneChecks(serve, ref)
		if err != nil {
			return err
		}
		r.Checks = append(append(r.Checks, cs...),
			accept.Check{Name: "tune --server URL test time s", Got: ref.Spent.Seconds(), Want: "<= 180", OK: ref.Spent <= 3*time.Minute})
		g.say("%s/%s: tune against sqmkit serve %d/%d kbit/s, against the reference server %d/%d kbit/s",
			t.p.Name, r.Backend, rr.TuneServe[0], rr.TuneServe[1], rr.TuneURL[0], rr.TuneURL[1])
	}
	r.Status = status(r.Checks)
	return busy
}

// sameLetters wants the reference server's grade letters to be sqmkit
// serve's on the same path: the overall one (the mean of the download's and
// the upload's added mean) and the download's and the upload's; Got is how
// many letters apart. Two means astride a letter's edge, each within
// letterEdge of it, agree: a few milliseconds decide that letter, not the
// server. The bidirectional phase's letters are in the log, not checked:
// in the emulated guest the reference server's TLS shares the router's two
// vCPUs, and with both directions loaded its handshakes wait on them
// (docs/results.md).
func sameLetters(ref, own accept.Measurement) []accept.Check {
	var cs []accept.Check
	pair := func(name string, a, b float64) {
		la, lb := bbresult.Grade(a), bbresult.Grade(b)
		d := math.Abs(float64(letterRank(la) - letterRank(lb)))
		cs = append(cs, accept.Check{Name: fmt.Sprintf("%s letter: reference server %s (+%.1f ms), sqmkit serve %s (+%.1f ms)", name, la, a, lb, b),
			Got: d, Want: fmt.Sprintf("0 letters apart, or 1 astride an edge within %.0f %% of it", 100*letterEdge), OK: d == 0 || d == 1 && astride(a, b)})
	}
	rd, od := ref.Phase(accept.Download), own.Phase(accept.Download)
	ru, ou := ref.Phase(accept.Upload), own.Phase(accept.Upload)
	if rd == nil || od == nil || ru == nil || ou == nil {
		return []accept.Check{{Name: "both tests measured a download and an upload", Want: "yes"}}
	}
	pair("grade", (rd.AddedMean+ru.AddedMean)/2, (od.AddedMean+ou.AddedMean)/2)
	pair(accept.Download, rd.AddedMean, od.AddedMean)
	pair(accept.Upload, ru.AddedMean, ou.AddedMean)
	return cs
}

// letterEdge is how close to a letter's edge two added means may sit on
// either side of it and still agree (sameLetters).
const letterEdge = 0.05

// astride says whether a and b sit on either side of a letter's edge,
// each within letterEdge of it: each moved that far toward the other
// takes the other's letter.
func astride(a, b float64) bool {
	lo, hi := min(a, b), max(a, b)
	return bbresult.Grade(lo*(1+letterEdge)) == bbresult.Grade(hi) && bbresult.Grade(hi*(1-letterEdge)) == bbresult.Grade(lo)
}

// letterRank orders the grade letters, A+ first; -1 for none.
func letterRank(l string) int { return slices.Index([]string{"A+", "A", "B", "C", "D", "F"}, l) }

// rpmFigures compares goresponsiveness and `sqmkit test --rpm` from the
// client against the reference server (refserver.Compare) and keeps every
// command's output as NAME.log.
func (g *guest) rpmFigures(t *topo, dir, url string, rr *rpmResult) error {
	return t.endpointsHeld(func() error {
		run := func(argv ...string) (string, error) { return t.sh.run(nsClient, argv...) }
		logs := filepath.Join(t.dir, "goresp-logs") // no dot on its path (GoresponsivenessArgs)
		os.MkdirAll(logs, 0o755)
		c, err := refserver.Compare(run, g.tools.goresp, g.tools.sqmkit, url, logs, func() error { return g.settle(filepath.Base(dir) + " rpm") })
		for _, o := range c.Outputs {
			os.WriteFile(filepath.Join(dir, o.Name+".log"), []byte(o.Text), 0o644)
		}
		if err != nil {
			return err
		}
		for i, s := range c.Ours {
			rr.Sqmkit[i], rr.SqmkitEarlier[i], rr.SqmkitConns[i] = s.RPM, s.EarlierDraft(), s.Conns
			rr.SqmkitForeign[i], rr.SqmkitLoaded[i] = s.ForeignMs(), s.LoadedMs()
		}
		rr.setTheirs(c.Theirs[0], c.Theirs[1])
		return nil
	})
}

// endpointsHeld runs fn with the client's and the server's namespaces at
// refserver.EndpointLowat and the client's device at
// refserver.ClientGSOMax, and puts back what they were after it: both
// namespaces serve the next scenarios.
func (t *topo) endpointsHeld(fn func() error) error {
	lowat := func(v string) []string { return []string{"sysctl", "-qw", refserver.LowatSysctl + "=" + v} }
	gso := func(v string) []string { return []string{"ip", "link", "set", "c0", "gso_max_size", v} }
	_, mark, _ := strings.Cut(refserver.EndpointLowat, "=")
	knobs := []struct {
		ns, to string
		read   []string
		parse  func(string) (string, error)
		set    func(string) []string
	}{
		{nsClient, mark, []string{"sysctl", "-n", refserver.LowatSysctl}, trimmed, lowat},
		{nsServer, mark, []string{"sysctl", "-n", refserver.LowatSysctl}, trimmed, lowat},
		{nsClient, refserver.ClientGSOMax, []string{"ip", "-d", "link", "show", "dev", "c0"}, gsoMaxSize, gso},
	}
	var back []func() error // each puts one value back
	err := func() error {
		for _, k := range knobs {
			out, err := t.sh.run(k.ns, k.read...)
			if err != nil {
				return err
			}
			v, err := k.parse(out)
			if err != nil {
				return err
			}
			ns, was := k.ns, k.set(v)
			back = append(back, func() error { return t.sh.must(ns, was) })
			if err := t.sh.must(k.ns, k.set(k.to)); err != nil {
				return err
			}
		}
		return fn()
	}()
	// every value read is put back, also when setting the next one failed
	for _, b := range back {
		if rerr := b(); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

func trimmed(s string) (string, error) { return strings.TrimSpace(s), nil }

var gsoField = regexp.MustCompile(`\bgso_max_size (\d+)\b`)

// gsoMaxSize reads a device's gso_max_size from `ip -d link show` (the
// guest's sysfs has no such file).
func gsoMaxSize(out string) (string, error) {
	m := gsoField.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("no gso_max_size in ip -d link show's output:\n%s", out)
	}
	return m[1], nil
}

// setTheirs keeps goresponsiveness's figures, a NaN or an infinite RPM
// as 0: result.json and summary.json are JSON, which has neither, and a
// value that cannot be written loses the whole file (TestRPMBands).
func (rr *rpmResult) setTheirs(down, up refserver.Theirs) {
	for i, d := range []refserver.Theirs{down, up} {
		rr.Goresponsiveness[i], rr.GoresponsivenessConns[i] = 0, d.Conns
		rr.GoresponsivenessRounds[i], rr.GoresponsivenessKept[i] = d.Rounds, d.Kept
		rr.GoresponsivenessForeign[i], rr.GoresponsivenessLoaded[i], rr.GoresponsivenessMbps[i] = d.Foreign, d.Loaded, d.Mbps
		if !math.IsNaN(d.RPM) && !math.IsInf(d.RPM, 0) {
			rr.Goresponsiveness[i] = d.RPM
		}
	}
}

// rpmChecks hold sqmkit's RPM, aggregated as goresponsiveness does,
// within refserver.Band of goresponsiveness's per direction, by the rule
// yardstick picks (recorded in rr.Rule). The figure sqmkit
// prints (the draft's current aggregation) is recorded beside it, not
// held to the band: under a standing queue the two aggregations differ
// several-fold by design (docs/results.md). A direction goresponsiveness
// did not measure (no probe in its last window, or a load generator that
// gave up and left the link unloaded) is unproven, not failed. Each
// check names how many of goresponsiveness's final-window probe rounds
// returned: it drops those still running when it stops, which on a slow
// path leaves its fastest (refserver.Theirs).
func rpmChecks(rr *rpmResult, shaped bool) []accept.Check {
	var cs []accept.Check
	for i, dir := range []string{"download", "upload"} {
		ratio, half, rule := yardstick(rr, i, shaped)
		rr.Rule[i] = rule
		name := fmt.Sprintf("%s RPM, sqmkit's latencies as goresponsiveness aggregates (on %d connections) / goresponsiveness's (on %d)", dir, rr.SqmkitConns[i], rr.GoresponsivenessConns[i])
		if half != "" {
			name = fmt.Sprintf("%s RPM's foreign half, sqmkit's (on %d connections) / goresponsiveness's (on %d): %s", dir, rr.SqmkitConns[i], rr.GoresponsivenessConns[i], half)
		}
		if n := rr.GoresponsivenessRounds[i]; n > 0 {
			name += fmt.Sprintf(", which kept %d of the %d probe rounds of its final window", rr.GoresponsivenessKept[i], n)
		}
		c := accept.Check{Name: name, Got: ratio,
			Want: fmt.Sprintf("%.2f–%.2f", 1-refserver.Band, 1+refserver.Band), OK: refserver.Within(ratio, refserver.Band)}
		switch {
		case rr.GoresponsivenessConns[i] == 0:
			c.OK, c.Got, c.Unproven = false, 0, "goresponsiveness's load generator gave up (0 connections): its first connection had not started within its first second"
		case rr.Goresponsiveness[i] == 0:
			c.OK, c.Got, c.Unproven = false, 0, "goresponsiveness's last window held no completed probe (RPM NaN)"
		case math.IsNaN(ratio) || math.IsInf(ratio, 0): // not JSON
			c.OK, c.Got = false, 0
		}
		cs = append(cs, c)
	}
	return cs
}

// yardstick is how direction i's two RPMs compare: the whole figure
// (sqmkit's in goresponsiveness's aggregation over goresponsiveness's),
// except for the upload through a shaper where goresponsiveness's own
// 16 kB HTTP/2 frame, at its connection's share of the goodput, takes
// longer than a quarter of its loaded GET: that GET then waits mostly
// behind its client's own write, not the network's queue, so the loaded
// halves are reported beside the frame's time, not judged, and the
// foreign halves (a new connection's handshakes and GET, the network's
// alone) are compared (TestYardstick). It returns the ratio, the halves
// when it compared the foreign one ("" the whole) and the rule in words.
func yardstick(rr *rpmResult, i int, shaped bool) (ratio float64, halves, rule string) {
	whole := rr.SqmkitEarlier[i] / rr.Goresponsiveness[i]
	frame := refserver.FrameMs(rr.GoresponsivenessMbps[i], rr.GoresponsivenessConns[i])
	theirs, ours := rr.GoresponsivenessLoaded[i], rr.SqmkitLoaded[i]
	if !shaped || i != 1 || theirs <= 0 || rr.GoresponsivenessForeign[i] <= 0 || rr.SqmkitForeign[i] <= 0 || !(frame > theirs/4) {
		return whole, "", fmt.Sprintf("whole RPM (goresponsiveness's 16 kB frame %s ms beside its loaded GET %s ms)", bbresult.Fixed(frame, 1), bbresult.Fixed(theirs, 1))
	}
	ratio = rr.GoresponsivenessForeign[i] / rr.SqmkitForeign[i] // RPMs are 60000 over these
	halves = fmt.Sprintf("%.1f ms a round trip, goresponsiveness's %.1f; the loaded halves, not judged: sqmkit's %.0f ms, goresponsiveness's %.0f ms beside its own 16 kB frame's %.0f ms",
		rr.SqmkitForeign[i], rr.GoresponsivenessForeign[i], ours, theirs, frame)
	return ratio, halves, fmt.Sprintf("foreign half: goresponsiveness's 16 kB frame takes %.0f ms at %.2f Mbit/s a connection, over a quarter of its loaded GET's %.0f ms, so its loaded half times its own write",
		frame, rr.GoresponsivenessMbps[i]/float64(rr.GoresponsivenessConns[i]), theirs)
}

// tuneChecks hold tune's rates against the reference server's URL within
// rpmTuneBand of its rates against sqmkit serve (tuneBand). Where the
// URL's tune found the router's CPU the bound and sqmkit serve's did not,
// its rates are the guest's CPU ceiling, not a search of the line: the
// router build's TLS to nginx (a core of the guest's two, tune says) and
// nginx's own TLS share the router's vCPUs. Those rates cannot show the
// band, which stays unproven unless they came out higher; each CPU
// verdict is then held to the lab's gauge instead (cpuCeilingCheck), as
// make lab's tune acceptance does (TestTuneChecks).
func (g *guest) tuneChecks(serve, ref *tune.Outcome) ([]accept.Check, error) {
	cs := []accept.Check{tuneBand("download", ref.Search.Download.RateKbit, serve.Search.Download.RateKbit),
		tuneBand("upload", ref.Search.Upload.RateKbit, serve.Search.Upload.RateKbit)}
	bound := cpuVerdicts(ref.Search)
	if len(bound) == 0 || len(cpuVerdicts(serve.Search)) > 0 {
		return cs, nil
	}
	for i := range cs {
		if !cs[i].OK && cs[i].Got < 1 {
			c := bound[0]
			cs[i].Unproven = fmt.Sprintf("against the URL the router's CPU was the bound (%s phase, cpu%d %.0f%% busy at %.1f Mbit/s, tune's own load and TLS %.0f%% of a core), against sqmkit serve it was not: its rates are that ceiling, held to the lab's gauge below",
				c.Phase, c.Busiest, 100*c.BusiestShare, c.ShapedMbps, 100*c.SelfCores)
		}
	}
	for _, c := range bound {
		busiest, err := g.busiestOver(*c)
		if err != nil {
			return nil, err
		}
		check, _ := cpuCeilingCheck(*c, busiest)
		check.Name = "tune --server URL: " + check.Name
		cs = append(cs, check)
	}
	return cs, nil
}

// tuneAgainst runs `sqmkit tune` (no --write) from the router against one
// server and returns its outcome; its log and JSON are tune-NAME.*.
func (g *guest) tuneAgainst(sh *shell, sq, root, dev, dir, name string, server ...string) (*tune.Outcome, error) {
	if err := g.settle("tune " + name); err != nil {
		return nil, err
	}
	js := filepath.Join(dir, "tune-"+name+".json")
	args := append(append([]string{sq, "tune", "--root", root, "--json", js}, server...), dev)
	out, err := sh.run(nsRouter, args...)
	os.WriteFile(filepath.Join(dir, "tune-"+name+".log"), []byte(out), 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqmkit tune against %s: %w", strings.Join(server, " "), err)
	}
	return readOutcome(js)
}

// tuneBand wants tune's rate against the reference server within
// rpmTuneBand of its rate against sqmkit serve.
func tuneBand(dir string, url, serve int) accept.Check {
	ratio := float64(url) / float64(max(serve, 1))
	return accept.Check{Name: fmt.Sprintf("tune %s: against the reference server / against sqmkit serve (%d / %d kbit/s)", dir, url, serve), Got: ratio,
		Want: fmt.Sprintf("%.2f–%.2f", 1-rpmTuneBand, 1+rpmTuneBand), OK: ratio >= 1-rpmTuneBand && ratio <= 1+rpmTuneBand}
}
