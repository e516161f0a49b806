package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/report"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func TestTestUsageErrors(t *testing.T) {
	// without a SERVER, a test measures against SQMKIT_SERVER
	t.Setenv("SQMKIT_SERVER", "https://192.0.2.1/config")
	for _, args := range [][]string{
		{"--port", "5000"},
		{"ftp://host.example/config"},
		{"https://host.example/config", "--rpm", "host"},
		{"a", "b"},
		{"-4", "-6", "host"},
		{"--streams", "0", "host"},
		{"--probe-interval", "1us", "host"},
		{"--port", "70000", "host"},
		{"host", "--bogus"},
		{"--compare", "only-one.json"},
		{"--rpm-conns", "8", "host"},           // without --rpm it would change nothing
		{"--rpm", "host", "--rpm-conns", "0"},  // 1 to rpm.MaxConns
		{"--rpm", "host", "--rpm-conns", "17"}, // never more than the draft's
		{"host", "--rpm", "host", "--rpm-conns", "x"},
		{"--rpm-rate", "10", "host"},           // without --rpm it would change nothing
		{"--rpm", "host", "--rpm-rate", "0"},   // 1 to rpm.MaxRate
		{"--rpm", "host", "--rpm-rate", "101"}, // never more than the draft's
	} {
		var stderr strings.Builder
		if code := runTest(args, io.Discard, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("test %q: exit %d, want 2 and a message; stderr %q", args, code, stderr.String())
		}
		// a limit refused names its flag
		for _, a := range args {
			if strings.HasPrefix(a, "--rpm-") && !strings.Contains(stderr.String(), strings.TrimLeft(a, "-")) {
				t.Errorf("test %q: %q does not name %s", args, stderr.String(), a)
			}
		}
	}
	if code := runTest([]string{"--compare", "missing-a.json", "missing-b.json"}, io.Discard, io.Discard); code != 1 {
		t.Errorf("--compare of missing files: exit %d, want 1", code)
	}
}

// TestTestCommand runs the command end to end on loopback, with flags after
// the server argument, and feeds its --json file back to --compare.
func TestTestCommand(t *testing.T) {
	addr := loopbackServer(t)
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	js := filepath.Join(dir, "run.json")
	args := []string{host, "--port", port, "--quiet", "--idle", "200ms", "--download", "300ms", "--upload", "0", "--bidir", "0", "--streams", "1", "--json", js}
	var stdout strings.Builder
	if code := runTest(args, &stdout, io.Discard); code != 0 || !strings.Contains(stdout.String(), "Grade") {
		t.Fatalf("test %q: exit %d, summary:\n%s", args, code, &stdout)
	}
	res, err := report.ReadJSON(reporttest.Open(t, js))
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerAddr != addr || len(res.Phases) != 3 || res.Streams != 1 {
		t.Errorf("result: addr %s, %d phases, %d streams", res.ServerAddr, len(res.Phases), res.Streams)
	}
	if code := runTest([]string{"--compare", js, js}, io.Discard, io.Discard); code != 0 {
		t.Errorf("--compare: exit %d", code)
	}
}

// loopbackServer serves on one free port for both TCP and UDP.
func loopbackServer(t *testing.T) string {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			ln.Close()
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { bbserver.New(bbserver.Config{}).Serve(ctx, ln, pc.(*net.UDPConn)); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return ln.Addr().String()
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// TestIncompleteNotGraded: a test the server cuts short (here its byte
// budget) prints no grade, says INCOMPLETE, exits 1, is marked in its
// JSON with no grade, and --compare marks it and gives no change.
func TestIncompleteNotGraded(t *testing.T) {
	bin := buildSqmkit(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	srv := exec.Command(bin, "serve", "--listen", addr, "--max-bytes", "50M")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	time.Sleep(500 * time.Millisecond)
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.json")
	out, err := exec.Command(bin, "test", addr, "--quiet", "--idle", "300ms", "--download", "3s", "--upload", "3s", "--bidir", "3s", "--json", cut).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "INCOMPLETE: not graded") || strings.Contains(string(out), "Grade A") {
		t.Fatalf("a cut-short test: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(cut)
	var res bbresult.Result
	if err := json.Unmarshal(b, &res); err != nil || res.Incomplete == "" || res.Grades.DSLReports != "" {
		t.Errorf("its JSON: %v, incomplete %q, grade %q", err, res.Incomplete, res.Grades.DSLReports)
	}
	whole := res
	whole.Incomplete = ""
	wb, _ := json.Marshal(whole)
	os.WriteFile(filepath.Join(dir, "whole.json"), wb, 0o644)
	out, _ = exec.Command(bin, "test", "--compare", filepath.Join(dir, "whole.json"), cut).CombinedOutput()
	if !strings.Contains(string(out), "INCOMPLETE") || regexp.MustCompile(`[+-][0-9.]+ ?%`).MatchString(string(out)) {
		t.Errorf("--compare with a cut-short run:\n%s", out)
	}
}

// TestTestOnRouter: on a router, a test whose route leaves through the
// queue's device runs and compares each loaded phase with the shaper's
// counters (here they agree: the test is the only traffic); a test or a
// tune whose route leaves by a device no queue shapes is refused before
// it starts, naming that device and the fix.
func TestTestOnRouter(t *testing.T) {
	router, server := tctest.NewPair(t, "rt", 79)
	for _, args := range [][]string{
		{"-n", router.Name, "link", "add", "eth3", "type", "veth", "peer", "name", "eth3p"},
		{"-n", router.Name, "addr", "add", "10.80.0.1/24", "dev", "eth3"},
		{"-n", router.Name, "link", "set", "eth3", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	bin := buildSqmkit(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface '"+router.Dev+"'\n\toption download '20000'\n\toption upload '10000'\n\toption script 'nss-zk.qos'\n"), 0o644)
	os.Symlink("/proc", filepath.Join(root, "proc")) // the CPU's counters: this host's
	if _, code, out := sqmkitIn(t, router, bin, true, "start", "--root", root, "--probe-cache", ""); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	port := strconv.Itoa(freePort(t))
	srv := exec.Command("ip", "netns", "exec", server.Name, bin, "serve", "--listen", net.JoinHostPort(server.Addr, port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	time.Sleep(300 * time.Millisecond)

	js := filepath.Join(t.TempDir(), "run.json")
	_, code, out := sqmkitIn(t, router, bin, true, "test", server.Addr, "--port", port, "--root", root, "--quiet",
		"--idle", "500ms", "--download", "3s", "--upload", "3s", "--bidir", "0", "--json", js)
	if code != 0 {
		t.Fatalf("test through the queue: exit %d\n%s", code, out)
	}
	res, err := report.ReadJSON(reporttest.Open(t, js))
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue != "wan" || len(res.PathChecks) > 2 {
		t.Fatalf("queue %q, checks %+v\n%s", res.Queue, res.PathChecks, out)
	}
	if len(res.PathChecks) < 2 {
		// a starved host read the counters too far from a phase's edges
		// to judge it, and the result says so (TestCheckSparseReads)
		if !strings.Contains(strings.Join(res.Notes, "\n"), "not checked") {
			t.Fatalf("%d path checks and no note why\n%s", len(res.PathChecks), out)
		}
		tctest.Absorbed(t, "path checks %+v: the counters were read too far from a phase's edges", res.PathChecks)
	}
	t.Logf("path checks: %+v; cpu: %+v", res.PathChecks, res.CPU)
	for _, c := range res.PathChecks {
		if c.Verdict != "agrees" {
			t.Errorf("%+v: the test was the only traffic\n%s", c, out)
		}
	}
	if !strings.Contains(out, "Route: through queue wan; its shaper counted what the test moved") || !strings.Contains(out, "Router CPU (") {
		t.Errorf("summary:\n%s", out)
	}
	// what each loaded phase cost this host's CPU (cpuload)
	if len(res.CPU) != 2 {
		t.Fatalf("cpu %+v", res.CPU)
	}
	// the shaper's cost is what the cores did beyond the test's own
	// process; on this idle host the veths' work can all land in the
	// test's own ticks for one phase (0 ms per Mbit), not for both
	costed := 0
	for _, c := range res.CPU {
		if c.CPUs != runtime.NumCPU() || c.MsPerMbit < 0 || c.BusiestShare <= 0 || c.BusiestShare > 1 || c.CeilingMbps < c.ShapedMbps {
			t.Errorf("cpu of %s: %+v", c.Phase, c)
		}
		if c.MsPerMbit > 0 {
			costed++
		}
	}
	if costed == 0 {
		t.Errorf("no phase cost any CPU beyond the test's own: %+v", res.CPU)
	}
	// and kept: the doctor judges the queue's rates against it
	diag, _, out := sqmkitIn(t, router, bin, true, "doctor", "--root", root, "--json")
	if !slices.ContainsFunc(diag.Findings, func(f doctor.Finding) bool {
		return strings.HasPrefix(f.ID, "cpu-") && strings.Contains(strings.Join(f.Evidence, " "), "test of ")
	}) {
		t.Errorf("doctor after a test on the router: no CPU finding\n%s", out)
	}

	_, code, out = sqmkitIn(t, router, bin, true, "test", "10.80.0.2", "--root", root, "--quiet")
	if code != 1 || !strings.Contains(out, "the route to 10.80.0.2 leaves by eth3, which no queue shapes (queues: wan on "+router.Dev+")") || !strings.Contains(out, "fix:") {
		t.Errorf("test off the queue's path: exit %d\n%s", code, out)
	}
	// a tune too: its steps would load another link than the shaper's
	_, code, out = sqmkitIn(t, router, bin, true, "tune", "10.80.0.2", "--root", root)
	if code != 1 || !strings.Contains(out, "leaves by eth3, which no queue shapes") {
		t.Errorf("tune off the queue's path: exit %d\n%s", code, out)
	}
}

// TestTestUnreachableServer: a test with no server named measures against
// the default responsiveness server (here SQMKIT_SERVER, on a port nothing
// listens on, as a public one is to a router without the Internet): it is
// refused before any phase, with the server and the fix.
func TestTestUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + "/config"
	ln.Close()
	t.Setenv("SQMKIT_SERVER", url)
	var stdout, stderr strings.Builder
	code := runTest([]string{"--quiet", "--root", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), url+" could not be reached") || !strings.Contains(stderr.String(), "fix:") || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the server named with a fix", code, stdout.String(), stderr.String())
	}
}
