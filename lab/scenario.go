package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
	"github.com/sqmkit/sqmkit/lab/internal/procevents"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// Backend names on the command line; "none" is the unshaped link.
const unshaped = "none"

// allBackends is what `run` and `all` grade when no --backends is given.
var allBackends = append([]string{unshaped}, sqmkitBackends...)

// tools says which sqmkit subcommands exist in this build; the lab grades
// with the real ones as soon as they land.
type tools struct {
	// sqmkit is the full build (test, serve); router is the router build
	// the OpenWrt package installs, which the router namespace runs;
	// goresp is goresponsiveness, staged for rpm mode (rpm.go).
	sqmkit, router, tcshim, goresp string
	start, test, serve, doc        bool
}

func probeTools(bin string) tools {
	t := tools{sqmkit: filepath.Join(bin, "sqmkit"), router: filepath.Join(bin, "sqmkit-router"), tcshim: filepath.Join(bin, "tcshim"), goresp: filepath.Join(bin, "goresponsiveness")}
	has := func(cmd string) bool {
		sh := &shell{log: io.Discard}
		_, err := sh.run("", t.sqmkit, cmd, "-h")
		return err == nil
	}
	t.start, t.test, t.serve, t.doc = has("start") && has("stop"), has("test"), has("serve"), has("doctor")
	return t
}

// guest carries what every scenario of one guest boot shares.
type guest struct {
	tools   tools
	commit  string
	kernel  string // the guest's kernel release, for every result
	out     string
	stack   string // OpenWrt's userland built from pinned sources (openwrt/stack), "" when the plan needs none
	say     func(format string, a ...any)
	events  *procevents.Watcher // nil: no process counts
	noise   *noise.Reader       // nil: phases are graded without the noise gate
	settler *settler            // nil with noise
	gate    gate                // strict, or the demo's
	setUp   map[string]bool     // external backends whose setup ran in this boot
}

// label is how results name a backend: ext:NAME without its directory.
func label(b string) string {
	if pb, err := parseBackend(b); err == nil {
		return pb.name()
	}
	return b
}

// limitationKey is the profile key of a backend's recorded limitation: the
// sqmkit backend underneath (a .qos script has its backend's limits).
func limitationKey(name string) string {
	if b, err := parseBackend(name); err == nil && b.kind() != "" {
		return b.kind()
	}
	return name
}

// profileDir is where a profile's runs in a mode keep their files.
func profileDir(out, profile, mode string) string {
	if mode != "" {
		profile += "-" + mode
	}
	return filepath.Join(out, profile)
}

// profileRuns builds the lab for one profile and runs each backend on it:
// graded (each nil), or as each says (tune). A mode other than "" puts
// its files under PROFILE-MODE/: make lab and lab-ci grade and tune the
// same profile × backend, and one directory would hold the later run's
// test files and result.json over the earlier's.
func (g *guest) profileRuns(p *profile.Profile, backends []string, mode string, each func(*topo, string, *result) error) []result {
	dir := profileDir(g.out, p.Name, mode)
	os.MkdirAll(dir, 0o755)
	// appended: a second pass (secondPass) builds the profile's lab again
	logf, _ := os.OpenFile(filepath.Join(dir, "commands.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	defer logf.Close()
	sh := &shell{log: logf}
	fail := func(err error) []result {
		var rs []result
		for _, b := range backends {
			rs = append(rs, result{Profile: p.Name, Backend: label(b), Status: "error", Error: err.Error(), Dir: dir,
				Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Kernel: g.kernel})
		}
		return rs
	}
	g.say("%s: building client ⇄ router ⇄ modem ⇄ server (%d/%d kbit/s, %d ms, %d ms buffer, %s, overhead %d, %s)",
		p.Name, p.Down, p.Up, p.RTTms, p.BufferMs, p.LinkLayer, p.Overhead, p.Encap)
	t, err := buildTopo(sh, p, filepath.Join("/tmp/lab", p.Name), dir)
	if err != nil {
		return fail(err)
	}
	defer t.close()
	if err := t.startServers(g.tools.sqmkit, g.tools.serve); err != nil {
		return fail(err)
	}
	var rs []result
	for _, b := range backends {
		sdir := filepath.Join(dir, label(b))
		os.MkdirAll(sdir, 0o755)
		r := result{Profile: p.Name, Backend: label(b), Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Kernel: g.kernel, Dir: sdir}
		switch {
		case each != nil:
			err = each(t, b, &r)
		case b == unshaped:
			err = g.unshaped(t, &r)
		default:
			err = g.shaped(t, b, &r)
		}
		r.ended(err)
		r.limited(p.Limitations[limitationKey(b)])
		g.say("%s/%s: %s", p.Name, r.Backend, r.line())
		writeJSON(filepath.Join(sdir, "result.json"), &r)
		rs = append(rs, r)
	}
	return rs
}

// grade runs the grading tool and the cross-check on the current path;
// shaped: its phases are held to the shaped bars (keepClean).
func (g *guest) grade(t *topo, r *result, shaped bool) error {
	cross, err := t.iperfIrtt(r.Dir, "crosscheck")
	if err != nil {
		return fmt.Errorf("iperf3/irtt: %w", err)
	}
	r.Cross = &cross
	if !g.tools.test || !g.tools.serve {
		// sqmkit test is not in this build yet: grade with the cross-check
		// tools and say so in the result.
		r.Test = &cross
		return nil
	}
	down := 0
	if shaped {
		down = r.DownKbit
	}
	m, discarded, err := g.cleanTest(t, r.Dir, down)
	r.Discarded = discarded
	var inc *inconclusive
	if err != nil && !errors.As(err, &inc) {
		return fmt.Errorf("sqmkit test: %w", err)
	}
	r.Test = &m
	r.CrossChecks = accept.Cross(m, cross)
	return err
}

func (g *guest) unshaped(t *topo, r *result) error {
	os.WriteFile(filepath.Join(r.Dir, "tc-before.txt"), []byte(t.tcStats()), 0o644)
	if err := g.grade(t, r, false); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	r.Checks = accept.Unshaped(*r.Test, t.p.ExpectBloatMs)
	r.Status = status(r.Checks)
	return nil
}

// status is the scenario's verdict on its checks: unproven when a bar
// missed was one the run could not measure (accept.Check.Unproven) and
// every other was met.
func status(cs []accept.Check) string {
	switch {
	case !accept.Passed(cs):
		return "fail"
	case accept.Unproven(cs):
		return "unproven"
	}
	return "pass"
}

// shaped configures the router through its UCI files, starts the backend
// twice (first start of the boot, then warm) and measures both, grades,
// asks the doctor, stops it and checks nothing was left behind.
func (g *guest) shaped(t *topo, name string, r *result) error {
	b, err := parseBackend(name)
	if err != nil {
		return err
	}
	if !g.tools.start {
		return fmt.Errorf("this sqmkit build has no start/stop yet (bin/sqmkit start -h fails)")
	}
	sc, err := g.prepare(t, b, r)
	if err != nil {
		return err
	}
	defer sc.close()
	run := func(stop bool) (string, cost, error) {
		c, err := b.command(g, sc, stop)
		if err != nil {
			return "", cost{}, err
		}
		return g.measure(&shell{log: t.sh.log, env: append(slices.Clone(sc.env), c.env...)}, nsRouter, c.args...)
	}
	before, err := t.qdiscs()
	if err != nil {
		return err
	}
	ifbsBefore := ifbs(t.sh)
	os.WriteFile(filepath.Join(r.Dir, "tc-before.txt"), []byte(t.tcStats()), 0o644)
	if err := dropCaches(); err != nil {
		g.say("cannot drop the page cache (%v); the first start is not a cold one", err)
	}
	sc0 := &startCost{}
	out, first, err := run(false)
	os.WriteFile(filepath.Join(r.Dir, "start-first.log"), []byte(out), 0o644)
	if err != nil {
		return err
	}
	sc0.First = first
	if _, _, err := run(true); err != nil {
		return fmt.Errorf("stop after the first start: %w", err)
	}
	out, warm, err := run(false)
	os.WriteFile(filepath.Join(r.Dir, "start.log"), []byte(out), 0o644)
	if err != nil {
		return err
	}
	sc0.Warm = warm
	_, sc0.GoProcess, _ = g.measure(t.sh, nsRouter, routerSqmkit(sc.root), "version")
	_, sc0.TCProcess, _ = g.measure(t.sh, nsRouter, "tc", "-V")
	r.Start = sc0
	os.WriteFile(filepath.Join(r.Dir, "tc-started.txt"), []byte(t.tcStats()), 0o644)
	// A start that waits for hotplug exits 0 and shapes nothing; grading
	// the bare link then would only blame the backend.
	if started, err := t.qdiscs(); err != nil || started == before {
		run(true)
		return fmt.Errorf("%s start on %s changed no qdisc: %s", name, sc.dev, lastLine(out))
	}
	gerr := g.grade(t, r, true)
	if gerr == nil {
		r.Checks = accept.Shaped(*r.Test, r.DownKbit)
	}
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	if out, err := t.sh.run(nsRouter, "tc", "-s", "qdisc", "show"); err == nil {
		bk := config.Cake // IFBName tells only NSS's IFB from the others'
		if b.kind() == "nss" {
			bk = config.NSS
		}
		if r.Cost, err = costOf(out, []string{sc.dev, plan.IFBName(sc.dev, bk)}, r.Test); err != nil {
			g.say("%s: shaper cost: %v", name, err)
		}
	}
	g.doctor(t, b, sc, r)
	out, _, err = run(true)
	os.WriteFile(filepath.Join(r.Dir, "stop.log"), []byte(out), 0o644)
	if err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	after, err := t.qdiscs()
	if err != nil {
		return err
	}
	left := leftovers(before, after, ifbsBefore, ifbs(t.sh), b.kind() == "nss")
	r.Checks = append(r.Checks, accept.Check{Name: "qdiscs/IFBs left after stop", Got: float64(len(left)),
		Want: "0 " + strings.Join(left, "; "), OK: len(left) == 0})
	r.Status = status(r.Checks)
	return nil
}

// prepare writes the router root a backend runs with (UCI files for
// sqmkit's own, none for an external one, which gets the LAB_*
// environment instead), installs the router build, and runs what the
// backend needs once: the package's files, an external setup.
func (g *guest) prepare(t *topo, b backend, r *result) (*scenario, error) {
	return g.prepareAt(t, b, r, t.p.Down*95/100, t.p.Up*95/100)
}

// prepareAt is prepare with the shaper at down/up kbit/s.
func (g *guest) prepareAt(t *topo, b backend, r *result, down, up int) (*scenario, error) {
	r.DownKbit, r.UpKbit = down, up
	sc := &scenario{root: filepath.Join(t.dir, "root-"+strings.NewReplacer(":", "-", "/", "-", "=", "-").Replace(b.name())),
		dev: t.shapedDev(b.kind()), down: r.DownKbit, up: r.UpKbit, close: func() {}}
	if q, ok := b.(qosBackend); ok {
		return g.prepareOpenWrt(t, q, sc)
	}
	if err := writeRouterRoot(sc.root, t.p, sc.dev, b.kind(), "", r.DownKbit, r.UpKbit); err != nil {
		return nil, err
	}
	if err := installSqmkit(g, sc.root); err != nil {
		return nil, fmt.Errorf("router build: %w (make build builds bin/sqmkit-router)", err)
	}
	scratch := filepath.Join(t.dir, "scratch-"+filepath.Base(sc.root))
	os.MkdirAll(scratch, 0o755)
	sc.lab = labEnv(t.p, sc.dev, scratch, sc.down, sc.up)
	switch b := b.(type) {
	case extBackend:
		// Foreign trees are judged without sqmkit's config: doctor then
		// looks at what the kernel holds.
		os.Remove(filepath.Join(sc.root, "etc/config/sqm"))
		if err := b.setup(g, t.sh, sc); err != nil {
			return nil, err
		}
	}
	if b.kind() == "nss" {
		if _, err := os.Stat(g.tools.tcshim); err != nil {
			return nil, fmt.Errorf("nss needs the lab's tc shim: %w (make build builds bin/tcshim from internal/tc/tcshim)", err)
		}
		// The lab's stand-in for the NSS-patched tc (internal/tc/tcshim).
		shim := filepath.Join(t.dir, "shim")
		os.MkdirAll(shim, 0o755)
		os.Remove(filepath.Join(shim, "tc"))
		if err := os.Symlink(g.tools.tcshim, filepath.Join(shim, "tc")); err != nil {
			return nil, err
		}
		sc.env = []string{"PATH=" + shim + ":" + os.Getenv("PATH"), "SQMKIT_REAL_TC=/usr/sbin/tc"}
	}
	return sc, nil
}

// doctor runs `sqmkit doctor` on the live tree. Its fail findings fail a
// scenario of sqmkit's own; on a foreign tree they are recorded, not
// failing: judging such trees is what the doctor is for.
func (g *guest) doctor(t *topo, b backend, sc *scenario, r *result) {
	if !g.tools.doc {
		return
	}
	args := []string{routerSqmkit(sc.root), "doctor", "--json", "--root", sc.root}
	if b.kind() == "" {
		args = append(args, sc.dev)
	}
	out, _ := (&shell{log: t.sh.log, env: sc.env}).run(nsRouter, args...)
	os.WriteFile(filepath.Join(r.Dir, "doctor.json"), []byte(out), 0o644)
	if json.Valid([]byte(out)) {
		r.Doctor = json.RawMessage(out)
	}
	if b.kind() != "" {
		r.Checks = append(r.Checks, doctorCheck(out))
	}
}

// doctorCheck fails on any finding of severity fail in `sqmkit doctor
// --json`, decoded with the doctor's own report type.
func doctorCheck(out string) accept.Check {
	c := accept.Check{Name: "doctor fail findings", Want: "0"}
	var r doctor.Diagnosis
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		c.Want = "0 (doctor printed no JSON report: " + err.Error() + ")"
		return c
	}
	var failed []string
	for _, f := range r.Findings {
		if f.Severity == doctor.Fail {
			failed = append(failed, f.ID+" "+f.Subject)
		}
	}
	c.Got, c.OK = float64(len(failed)), len(failed) == 0
	if len(failed) > 0 {
		c.Want += " (" + strings.Join(failed, "; ") + ")"
	}
	return c
}

func ifbs(sh *shell) []string {
	out, _ := sh.run(nsRouter, "ip", "-o", "link", "show", "type", "ifb")
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, strings.TrimSuffix(strings.SplitN(f[1], "@NONE", 2)[0], ":"))
		}
	}
	return names
}

// leftovers lists what stop left behind: qdisc lines not in the baseline
// and new IFBs (nss keeps its IFB by design, without a qdisc of its own).
func leftovers(before, after string, ifbBefore, ifbAfter []string, keepIFB bool) []string {
	base := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		base[strings.TrimSpace(l)] = true
	}
	kept := map[string]bool{}
	var left []string
	for _, name := range ifbAfter {
		if !slices.Contains(ifbBefore, name) {
			if keepIFB {
				kept[name] = true
				continue
			}
			left = append(left, "IFB "+name)
		}
	}
	for _, l := range strings.Split(after, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || base[l] {
			continue
		}
		// A kept IFB may hold only the kernel's default root (handle 0:).
		if f := strings.Fields(l); len(f) > 4 && f[2] == "0:" && kept[f[4]] {
			continue
		}
		left = append(left, l)
	}
	return left
}
