package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
)

// Flags a sweep alone reads are refused with a search, before anything is
// touched (the root here has no config at all).
func TestTuneSweepFlagsAlone(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--line", "40000:8000", "10.0.0.1"}, "--line goes with --sweep"},
		{[]string{"--sweep-stop", "3", "10.0.0.1"}, "--sweep-stop goes with --sweep"},
		{[]string{"--sweep-phase", "30s", "10.0.0.1"}, "--sweep-phase goes with --sweep"},
		{[]string{"--sweep", "80:100", "--write", "10.0.0.1"}, "does not combine with --write"},
	} {
		var out, errb bytes.Buffer
		root := t.TempDir()
		if code := runTune(append([]string{"--root", root}, c.args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("tune %q: exit %d, %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// A server, by argument or --server, is checked before anything is
// touched: never a flag, a path or markup; a URL is a responsiveness
// server's.
func TestTuneServerUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "ftp://host.example/config"}, "is not a responsiveness server's config URL"},
		{[]string{"--server", "https://host.example/<b>"}, "is not a responsiveness server's config URL"},
		{[]string{"a/b"}, "neither an IP address nor a host name"},
		{[]string{"--server", "10.0.0.1", "wan", "lan"}, "with --server or --undo at most the SECTION"},
		{[]string{"--server=", "wan", "lan"}, "with --server or --undo at most the SECTION"}, // empty: the default server, as LuCI asks
		{[]string{"10.0.0.1", "wan", "lan"}, "want at most a SERVER and a SECTION"},
	} {
		var out, errb bytes.Buffer
		root := t.TempDir()
		if code := runTune(append([]string{"--root", root}, c.args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("tune %q: exit %d, %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

func TestSweepConfig(t *testing.T) {
	for _, c := range []struct {
		sweep, line string
		stop        int
		phase       time.Duration
		want        search.SweepConfig
		err         string
	}{
		{"80:100", "", 3, 30 * time.Second, search.SweepConfig{From: 0.8, To: 1, Step: 0.01, StopAfter: 3, Phase: 30 * time.Second}, ""},
		{"90:100", "40000:8000", 0, tune.DefaultStep, search.SweepConfig{From: 0.9, To: 1, Step: 0.01, LineDown: 40000, LineUp: 8000, Phase: tune.DefaultStep}, ""},
		{"100:80", "", 0, tune.DefaultStep, search.SweepConfig{}, "want FROM:TO"},
		{"80:100", "", -1, tune.DefaultStep, search.SweepConfig{}, "--sweep-stop -1"},
		// three seconds hold the 1.5 s transient and as much steady state
		{"80:100", "", 0, 3 * time.Second, search.SweepConfig{From: 0.8, To: 1, Step: 0.01, Phase: 3 * time.Second}, ""},
		{"80:100", "", 0, 2 * time.Second, search.SweepConfig{}, "--sweep-phase 2s: want at least 3s"},
	} {
		got, err := sweepConfig(c.sweep, c.line, c.stop, c.phase)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s %d %v: %v, want an error with %q", c.sweep, c.line, c.stop, c.phase, err, c.err)
			}
		case err != nil:
			t.Errorf("%s %s %d %v: %v", c.sweep, c.line, c.stop, c.phase, err)
		case !reflect.DeepEqual(got, c.want):
			t.Errorf("%s %s %d %v: %+v, want %+v", c.sweep, c.line, c.stop, c.phase, got, c.want)
		}
	}
}

// The table says when a confirm phase was measured again, and what it read.
func TestPrintTuneAgain(t *testing.T) {
	confirm := &bbresult.Result{Phases: []bbresult.Phase{{Name: "bidirectional", Grade: "A", AddedMedian: 7.2, AddedP95: 16.3}}}
	again := &bbresult.Result{Phases: []bbresult.Phase{{Name: "idle_before"}, {Name: "bidirectional", Grade: "A+", AddedMedian: 4.7, AddedP95: 10.3}}}
	for _, c := range []struct {
		name  string
		again *bbresult.Result
		want  string // "" when no line may say "measured again"
	}{
		{"measured again", again, "its bidirectional phase measured again: +4.7/+10.3 ms"},
		{"met at once", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			printTune(&b, &tune.Outcome{Search: &search.Result{}, Confirm: confirm, Again: c.again}, "cake")
			got := b.String()
			if c.want == "" && strings.Contains(got, "measured again") || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("printed:\n%s\nwant %q", got, c.want)
			}
		})
	}
}

// The confirm's line prints the figures tune judged (after each phase's
// first search.Transient seconds), not the whole phase's, whose p95 holds
// the start-up burst: here +60 ms in the first second, +2 ms after it.
func TestPrintTuneJudged(t *testing.T) {
	res := &bbresult.Result{Phases: []bbresult.Phase{
		{Name: "idle_before", Start: 0, End: 5},
		{Name: "bidirectional", Grade: "A+", Start: 5, End: 15, AddedMedian: 2.0, AddedP95: 60.0},
	}}
	for ts := 0.0; ts < 15; ts += 0.1 {
		rtt := 20.0
		switch {
		case ts >= 5 && ts < 6:
			rtt = 80
		case ts >= 6:
			rtt = 22
		}
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: ts, RTT: rtt})
	}
	var b bytes.Buffer
	printTune(&b, &tune.Outcome{Search: &search.Result{}, Confirm: res, Again: res}, "cake")
	got := b.String()
	for _, want := range []string{
		"judged after each phase's first 1.5 s: bidirectional +2.0/+2.0 ms\n",
		"its bidirectional phase measured again: +2.0/+2.0 ms",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("printed:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "+60.0") {
		t.Errorf("printed the whole phase's p95:\n%s", got)
	}
}

// A flat bidirectional frontier is said: the weaker grade the phase was
// judged against, and why.
func TestPrintTuneBidirOutOfReach(t *testing.T) {
	for _, c := range []struct {
		name string
		r    search.Result
		want string // "" when no line may say "judged against"
	}{
		{"flat", search.Result{BidirTarget: search.A, BidirOutOfReach: "bidirectional: no rate meets the target (A+): +6.6/+16.2 ms"},
			"bidirectional: judged against A: bidirectional: no rate meets the target (A+): +6.6/+16.2 ms\n"},
		{"met", search.Result{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			printTune(&b, &tune.Outcome{Search: &c.r}, "cake")
			got := b.String()
			if c.want == "" && strings.Contains(got, "judged against") || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("printed:\n%s\nwant %q", got, c.want)
			}
		})
	}
}

// A line measured CPU-bound says so, with the ceiling and the fix; so
// does a bidirectional phase that was.
func TestPrintTuneCPUBound(t *testing.T) {
	cpu := &bbresult.PhaseCPU{Busiest: 1, BusiestShare: 0.97, BusiestSoftirq: 0.9, CPUs: 1}
	r := search.Result{Target: search.APlus, Download: search.Choice{Target: search.APlus, RateKbit: 33000, Line: search.Line{GoodputKbit: 35000, RateKbit: 37000, CPU: cpu}}}
	r.BidirCPU = &bbresult.PhaseCPU{Busiest: 0, BusiestShare: 0.95, BusiestSoftirq: 0.7, CPUs: 1, ShapedMbps: 61.5}
	var b bytes.Buffer
	printTune(&b, &tune.Outcome{Search: &r}, "cake")
	for _, want := range []string{"CPU-bound at 35000 kbit/s: with the shaper open cpu1 was busy 97% (90% softirq)", "fix: fq_codel",
		"bidirectional: CPU-bound at 61500 kbit/s both ways together: cpu0 was busy 95% (70% softirq)", "that is the router's ceiling, not the line's"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed:\n%s\nwant %q", b.String(), want)
		}
	}
	// tune's own TLS to a responsiveness server took a core of the router's
	// two: the ceiling is not the router's alone, and it says so
	r.BidirCPU = &bbresult.PhaseCPU{Busiest: 1, BusiestShare: 0.93, BusiestSoftirq: 0.27, CPUs: 2, ShapedMbps: 33.9, SelfCores: 1.0, Bound: true}
	b.Reset()
	printTune(&b, &tune.Outcome{Search: &r}, "cake")
	if want := "while tune's own load and TLS took 100% of a core of it"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "both rates came down to fit it; that is the router's ceiling, not the line's") {
		t.Errorf("printed:\n%s\nwant %q", b.String(), want)
	}
}

// TestTuneArgs: an empty --server (what LuCI's Tune page sends when its
// Server field is left empty) is the default server, and the argument
// after it the SECTION, never a host named like the section.
func TestTuneArgs(t *testing.T) {
	for _, c := range []struct {
		pos                  []string
		flag                 string
		set, undo            bool
		wantAddr, wantSelect string
	}{
		{[]string{"wan"}, "", true, false, "", "wan"},
		{[]string{"wan"}, "10.0.0.1", true, false, "10.0.0.1", "wan"},
		{[]string{"10.0.0.1", "wan"}, "", false, false, "10.0.0.1", "wan"},
		{[]string{"10.0.0.1"}, "", false, false, "10.0.0.1", ""},
		{nil, "", false, false, "", ""},
		{[]string{"wan"}, "", false, true, "", "wan"},
	} {
		addr, sel := tuneArgs(c.pos, c.flag, c.set, c.undo)
		if addr != c.wantAddr || sel != c.wantSelect {
			t.Errorf("%q --server=%q (given %v, undo %v): server %q, section %q; want %q, %q", c.pos, c.flag, c.set, c.undo, addr, sel, c.wantAddr, c.wantSelect)
		}
	}
}

// TestBrokenConfigRefused: a router whose /etc/config/sqm does not parse is
// refused a test with the file and line, never sent to the public server
// behind its back.
func TestBrokenConfigRefused(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1\n"), 0o644)
	var out, errb bytes.Buffer
	code := runTest([]string{"--quiet", "--root", root}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "etc/config/sqm:2") || !strings.Contains(errb.String(), "fix:") || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the file's line", code, out.String(), errb.String())
	}
}

// TestBadEnvServerNamed: a $SQMKIT_SERVER that is not a server is named as
// the bad one.
func TestBadEnvServerNamed(t *testing.T) {
	t.Setenv("SQMKIT_SERVER", "ftp://x/config")
	var out, errb bytes.Buffer
	if code := runTest([]string{"--quiet", "--root", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "$SQMKIT_SERVER") {
		t.Errorf("exit %d, stderr %q; want 2 naming $SQMKIT_SERVER", code, errb.String())
	}
}
