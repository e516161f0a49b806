//go:build !router

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/report"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestRPMThroughBottleneck runs `sqmkit test --rpm` against `sqmkit serve
// --rpm` through a 150 Mbit/s tbf with a 2.5 MB buffer on each side, the
// path where the client's foreign probes used to overrun the server's
// handshake cap and one refused probe ended the test. Every run must
// complete with an RPM. SQMKIT_RPM_RUNS sets the number of runs (1 in
// make test; docs/results.md has a run of 10).
func TestRPMThroughBottleneck(t *testing.T) {
	runs := 1
	if v, err := strconv.Atoi(os.Getenv("SQMKIT_RPM_RUNS")); err == nil && v > 0 {
		runs = v
	}
	srv, cli := tctest.NewPair(t, "rpm", 79)
	for _, n := range []*tctest.Netns{srv, cli} {
		n.Exec(t, "tc", "qdisc", "add", "dev", n.Dev, "root", "tbf", "rate", "150mbit", "burst", "64k", "limit", "2500000")
	}
	bin := buildSqmkit(t)
	addr := srv.Addr + ":4443"
	serveRPM(t, srv, bin, srv.Addr+":5201", addr)
	ok := 0
	for i := range runs {
		c := exec.Command("ip", "netns", "exec", cli.Name, bin, "test", "--rpm", "https://"+addr+"/config", "--rpm-insecure")
		b, err := c.CombinedOutput()
		line := strings.TrimSpace(string(b))
		if err == nil && strings.Contains(line, " RPM (download ") && !strings.Contains(line, "cut short") {
			ok++
		}
		t.Logf("run %d: %v\n%s", i+1, err, line)
	}
	fmt.Fprintf(os.Stderr, "rpm through 150 Mbit/s, 2.5 MB tbf: %d/%d runs completed\n", ok, runs)
	if ok != runs {
		t.Errorf("%d of %d runs completed", ok, runs)
	}
	// --rpm-conns holds each direction to at most that many connections,
	// and --rpm-rate the foreign probes, each a new connection, to that
	// many a second: at 150 Mbit/s the draft's PTC alone would allow MPS
	opens, start := activeOpens(t, cli), time.Now()
	b, err := exec.Command("ip", "netns", "exec", cli.Name, bin, "test", "--rpm", "https://"+addr+"/config", "--rpm-insecure", "--rpm-conns", "3", "--rpm-rate", "2").CombinedOutput()
	opened, secs := activeOpens(t, cli)-opens, time.Since(start).Seconds()
	st, perr := refserver.Stages(b)
	if err != nil || perr != nil || st[0].Conns > 3 || st[1].Conns > 3 || st[0].Conns < 1 {
		t.Errorf("--rpm-conns 3: %v, %v, stages %+v\n%s", err, perr, st, b)
	}
	// the config's connection, 3 loads per direction, a foreign probe per
	// slot from each direction's start, and a few spare: a load or a self
	// probe whose connection closed dials again (PTC alone: over 1000)
	t.Logf("--rpm-rate 2: %d TCP connections opened in %.1f s", opened, secs)
	if most := 1 + 2*3 + int(2*secs) + 2 + 6; opened > most || opened < 1+2*3 {
		t.Errorf("--rpm-rate 2: %d TCP connections opened in %.0f s, want %d to %d", opened, secs, 1+2*3, most)
	}
}

// activeOpens is the TCP connections ns has opened so far (nstat's
// absolute TcpActiveOpens; -s leaves nstat's history alone).
func activeOpens(t *testing.T, ns *tctest.Netns) int {
	t.Helper()
	f := strings.Fields(ns.Exec(t, "nstat", "-asz", "TcpActiveOpens"))
	if i := slices.Index(f, "TcpActiveOpens"); i >= 0 && i+1 < len(f) {
		if n, err := strconv.Atoi(f[i+1]); err == nil {
			return n
		}
	}
	t.Fatalf("no TcpActiveOpens in %s's nstat: %q", ns.Name, f)
	return 0
}

// TestTestAgainstResponsivenessServer: `sqmkit test URL` runs the same
// phases against a responsiveness server (here sqmkit serve --rpm) as
// against sqmkit serve, through a bloated modem (bloatedPath), and grades
// them with the same letters; its result has
// round trips only, says so, and carries the RPM.
func TestTestAgainstResponsivenessServer(t *testing.T) {
	srv, cli := bloatedPath(t, "rph", 81)
	bin := buildSqmkit(t)
	addr := srv.Addr + ":4443"
	serveRPM(t, srv, bin, srv.Addr+":8693", addr)
	grade := gradeEach(t, cli, bin, map[string][]string{"sqmkit": {srv.Addr}, "responsiveness": {"https://" + addr + "/config", "--rpm-insecure"}}, nil)
	h, s := grade["responsiveness"], grade["sqmkit"]
	if !h.RTTOnly || h.RPM == nil || h.RPM.RPM <= 0 || !strings.Contains(strings.Join(h.Notes, " "), "no one-way split") {
		t.Errorf("responsiveness result: rtt_only %v, rpm %+v, notes %q", h.RTTOnly, h.RPM, h.Notes)
	}
	sameGrades(t, h, s)
	for _, p := range h.Phases {
		if p.Name == bbresult.PhaseDownload && (p.DownloadMbps < 14 || p.DownloadMbps > 20.5) {
			t.Errorf("download goodput %.1f Mbit/s through a 20 Mbit/s tbf", p.DownloadMbps)
		}
	}
}

// bloatedPath: server ⇄ modem ⇄ client, 20 Mbit/s each way with 150 ms
// of queue on the modem (tctest.NewRouted) and loss-based TCP at both
// ends (tctest.LossBased): a load keeps it nearly full, about 130 ms on
// average, C's middle (60-200 ms), far from either edge, whichever
// server is measured. In a larger buffer the senders' windows, not the
// buffer, bound the queue, and its mean moved by 70 ms between runs.
func bloatedPath(t *testing.T, name string, subnet int) (srv, cli *tctest.Netns) {
	srv, modem, cli := tctest.NewRouted(t, name, subnet)
	tctest.LossBased(t, srv, cli)
	for _, dev := range []string{modem.Dev, modem.Peer} {
		modem.Exec(t, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "20mbit", "burst", "16k", "limit", "375000")
	}
	return srv, cli
}

// gradeEach runs `sqmkit test` from cli against each target (a name and
// its arguments) with short phases and returns the results by name; why,
// when set, adds the server side's story to a failure.
func gradeEach(t *testing.T, cli *tctest.Netns, bin string, targets map[string][]string, why func() string) map[string]*bbresult.Result {
	t.Helper()
	dir := t.TempDir()
	phases := []string{"--quiet", "--idle", "2s", "--download", "6s", "--upload", "6s", "--bidir", "0"}
	out := map[string]*bbresult.Result{}
	for name, target := range targets {
		js := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		args := append(append(append([]string{"netns", "exec", cli.Name, bin, "test"}, target...), phases...), "--json", js)
		b, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			more := ""
			if why != nil {
				more = why()
			}
			t.Fatalf("%s: %v\n%s%s", name, err, b, more)
		}
		t.Logf("%s:\n%s", name, b)
		res, err := report.ReadJSON(reporttest.Open(t, js))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = res
	}
	return out
}

// sameGrades: both servers fill the modem's queue with loss-based TCP
// (bloatedPath), so the download, the upload and the overall grade get
// the same letters (docs/results.md has the runs, against BBR senders and
// a bottleneck on the client's own device, where they did not).
func sameGrades(t *testing.T, rtt, own *bbresult.Result) {
	t.Helper()
	type grade struct {
		letter string
		ms     float64
	}
	grades := func(r *bbresult.Result) map[string]grade {
		g := map[string]grade{"overall": {r.Grades.DSLReports, r.Grades.DSLReportsAddedMs}}
		for _, p := range r.Phases {
			if p.Name == bbresult.PhaseDownload || p.Name == bbresult.PhaseUpload {
				g[string(p.Name)] = grade{p.Grade, p.AddedMean}
			}
		}
		return g
	}
	a, b := grades(rtt), grades(own)
	for _, name := range []string{string(bbresult.PhaseDownload), string(bbresult.PhaseUpload), "overall"} {
		if a[name].letter == "" || a[name].letter != b[name].letter {
			t.Errorf("%s grades: responsiveness server %s (+%.1f ms), sqmkit serve %s (+%.1f ms); want the same letter on one path",
				name, a[name].letter, a[name].ms, b[name].letter, b[name].ms)
		}
	}
}

// serveRPM runs `sqmkit serve --listen listen --rpm rpm` in ns until the
// test ends, and returns once its responsiveness server listens.
func serveRPM(t *testing.T, ns *tctest.Netns, bin, listen, rpm string) {
	t.Helper()
	serve := exec.Command("ip", "netns", "exec", ns.Name, bin, "serve", "--listen", listen, "--rpm", rpm)
	out, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "rpm: config https://") {
				select {
				case ready <- true:
				default:
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("sqmkit serve --rpm did not start")
	}
}

// TestOneSegmentToResponsivenessServer: `sqmkit test URL --one-segment`
// (tune's mode on a slow uplink, where a router's own TCP hands its
// shaper segments in pairs) uploads to a responsiveness server one TCP
// segment per packet, over HTTP/2 and over the router build's HTTP/1.1,
// as it does to sqmkit serve; without it TLS's records leave as
// multi-segment packets. tctest.LargestSent watches the client's device.
func TestOneSegmentToResponsivenessServer(t *testing.T) {
	srv, cli := tctest.NewPair(t, "oseg", 76)
	full, router := buildSqmkit(t), buildSqmkit(t, "router")
	addr := srv.Addr + ":4443"
	serveRPM(t, srv, full, srv.Addr+":5201", addr)
	for _, tc := range []struct {
		name, bin string
		seg       bool
	}{{"HTTP/2", full, true}, {"HTTP/2, plain", full, false}, {"HTTP/1.1", router, true}, {"HTTP/1.1, plain", router, false}} {
		largest := tctest.LargestSent(t, cli)
		args := []string{"netns", "exec", cli.Name, tc.bin, "test", "https://" + addr + "/config", "--rpm-insecure", "--quiet",
			"--idle", "1s", "--download", "0", "--upload", "3s", "--bidir", "0"}
		if tc.seg {
			args = append(args, "--one-segment")
		}
		out, err := exec.Command("ip", args...).CombinedOutput()
		most := largest()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if one := most <= tctest.OneSegment; one != tc.seg {
			t.Errorf("%s: most payload in one packet %d bytes: one segment %v, want %v", tc.name, most, one, tc.seg)
		}
	}
}
