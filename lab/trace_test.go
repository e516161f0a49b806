package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/trace"
)

// A trace run's figures: utilisation against the trace's capacity over the
// loaded part, added delay over the lead-in's lowest delay, per direction.
func TestTraceFigures(t *testing.T) {
	tr := &trace.Trace{Down: []int{10000, 10000, 20000, 20000}, Up: []int{2000, 2000, 2000, 2000}, Step: trace.Step} // 400 ms
	res := &bbresult.Result{ProbeInterval: 100}
	start := traceIdle.Seconds()
	for i := range 5 { // the idle lead-in: 20 ms down, 10 ms up
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: float64(i) * 0.5, Down: 20 + float64(i), Up: 10})
	}
	for i, added := range []float64{0, 10, 40, 50} { // loaded: 100 ms apart
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: start + 0.05 + float64(i)*0.1, Down: 20 + added, Up: 10 + added/2})
	}
	res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: start + 0.2, Lost: "up"})
	for i := range 4 { // half the capacity down, all of it up
		res.Samples.Throughput = append(res.Samples.Throughput, bbresult.Throughput{T: start + float64(i+1)*0.1, Download: float64(tr.Down[i]) / 2000, Upload: 2})
	}
	x := traceFigures(res, tr)
	if math.Abs(x.Utilisation[0]-0.5) > 1e-9 || math.Abs(x.Utilisation[1]-1) > 1e-9 {
		t.Errorf("utilisation %v", x.Utilisation)
	}
	if x.P50[0] != 25 || x.P50[1] != 12.5 || x.P99[0] < 49 || x.P99[0] > 50 {
		t.Errorf("added p50 %v p99 %v", x.P50, x.P99)
	}
	if x.Over30s[0] != 0.2 || x.Over30s[1] != 0 {
		t.Errorf("seconds over 30 ms %v", x.Over30s)
	}
	// half of 10, 10, 20, 20 Mbit/s for 100 ms each; 2 Mbit/s for 400 ms
	if math.Abs(x.MovedMB[0]-0.375) > 1e-9 || math.Abs(x.MovedMB[1]-0.1) > 1e-9 {
		t.Errorf("moved %v MB", x.MovedMB)
	}
}

// The bars of an autorate trace run: a following controller's figures
// pass; each way of not following misses.
func TestTraceChecks(t *testing.T) {
	good := traced{Utilisation: [2]float64{0.70, 0.68}, P95: [2]float64{23.2, 21.3}, Changes: 146}
	for _, tc := range []struct {
		name   string
		x      traced
		failed []string
	}{
		{"following", good, nil},
		{"rate left at the mean", traced{Utilisation: [2]float64{0.68, 0.63}, P95: [2]float64{2556, 1324}, Changes: 0},
			[]string{"download added p95 ms", "upload added p95 ms", "rate changes"}},
		{"sunk to the floor", traced{Utilisation: [2]float64{0.34, 0.31}, P95: [2]float64{6.0, 8.6}, Changes: 40},
			[]string{"download utilisation", "upload utilisation"}},
		// a recording's bars are its table's (Verizon: sqmkit, static-mean)
		{"recorded, following", traced{Kind: "recorded (mahimahi)", Utilisation: [2]float64{0.38, 0.48}, P95: [2]float64{282.5, 210.1}, Changes: 120}, nil},
		{"recorded, rate left at the mean", traced{Kind: "recorded (mahimahi)", Utilisation: [2]float64{0.58, 0.54}, P95: [2]float64{1310.1, 766.0}, Changes: 0},
			[]string{"download added p95 ms", "upload added p95 ms", "rate changes"}},
		{"recorded, sunk", traced{Kind: "recorded (mahimahi)", Utilisation: [2]float64{0.12, 0.1}, P95: [2]float64{20, 15}, Changes: 30},
			[]string{"download utilisation", "upload utilisation"}},
	} {
		var failed []string
		for _, c := range traceChecks(tc.x) {
			if !c.OK {
				failed = append(failed, c.Name)
			}
		}
		if !slices.Equal(failed, tc.failed) {
			t.Errorf("%s: failed %q, want %q", tc.name, failed, tc.failed)
		}
	}
	// ci runs a recording's first minute with sqmkit's controller, where
	// ../shared/traces has it, else lte's
	r := ciTrace("/repo")
	if r.Mode != "trace" || r.Seconds != 60 || r.Trace != "/repo/lab/traces/lte.trace" || !slices.Equal(r.Backends, []string{ctlSqmkit}) {
		t.Errorf("ci trace without the recordings %+v", r)
	}
	repo := t.TempDir()
	rec := filepath.Join(repo, "shared", "traces", "mahimahi", "Verizon-LTE-short")
	os.MkdirAll(filepath.Dir(rec), 0o755)
	os.WriteFile(rec+".down", []byte("1\n"), 0o644)
	if r := ciTrace(filepath.Join(repo, "main")); r.Trace != rec+".down,"+rec+".up" || r.Seconds != 60 {
		t.Errorf("ci trace beside the recordings %+v", r)
	}
}

// TestControllers: sqmkit-mq is asked for by name, shapes with cake_mq and
// is held to autorate's bars like sqmkit; tune is asked for by name and
// judged by its own checks; the others shape with cake.
func TestControllers(t *testing.T) {
	for _, c := range []struct {
		ctl            string
		known, sqmkit  bool
		shaper         string
		inDefaultsList bool
	}{
		{ctlNone, true, false, "cake", true},
		{ctlStaticMean, true, false, "cake", true},
		{ctlSqmkit, true, true, "cake", true},
		{ctlReflectors, true, true, "cake", true},
		{ctlSqmkitMQ, true, true, "cake_mq", false},
		{ctlTune, true, false, "cake", false},
		{"sqmkit-fq", false, false, "cake", false},
	} {
		if knownController(c.ctl) != c.known || sqmkitController(c.ctl) != c.sqmkit || ctlShaper(c.ctl) != c.shaper || slices.Contains(traceControllers, c.ctl) != c.inDefaultsList {
			t.Errorf("%s: known %v, sqmkit's %v, shaper %s, a default %v", c.ctl, knownController(c.ctl), sqmkitController(c.ctl), ctlShaper(c.ctl), slices.Contains(traceControllers, c.ctl))
		}
	}
}

// TestStatCPU: a controller's CPU by command (cpuUse: what it used between
// two readings, and its kernel share), from /proc/PID/stat lines
// whose command names hold spaces and parentheses.
func TestStatCPU(t *testing.T) {
	for _, c := range []struct {
		stat      string
		comm      string
		user, sys float64
		ok        bool
	}{
		{"412 (sqmkit) S 1 412 412 0 -1 4194560 900 0 0 0 250 50 7 3 20 0 4 0 100 0 0", "sqmkit", 2.57, 0.53, true},
		{"9 (tc -batch (x)) R 1 9 9 0 -1 0 0 0 0 0 1 2 3 4 20 0", "tc -batch (x)", 0.04, 0.06, true},
		{"9 (sleep) R 1 9 9 0 -1 0 0 0 0 0 1 2", "", 0, 0, false},
		{"9 sleep R 1", "", 0, 0, false},
	} {
		comm, got, ok := statCPU(c.stat)
		if comm != c.comm || ok != c.ok || math.Abs(got.User-c.user) > 1e-9 || math.Abs(got.Sys-c.sys) > 1e-9 {
			t.Errorf("statCPU(%q) = %q %+v %v, want %q %v/%v %v", c.stat, comm, got, ok, c.comm, c.user, c.sys, c.ok)
		}
	}
	total, by, kernel := cpuUse(map[string]cpuTime{"sqmkit": {User: 1, Sys: 1}, "sleep": {User: 1}},
		map[string]cpuTime{"sqmkit": {User: 2, Sys: 4}, "sleep": {User: 1}, "tc": {User: 0.5, Sys: 0.5}}, 10)
	if total != 50 || len(by) != 2 || by["sqmkit"] != 40 || by["tc"] != 10 || math.Abs(kernel-0.7) > 1e-9 {
		t.Errorf("cpuUse = %v %v %v, want 50 (sqmkit 40, tc 10), 0.7 in the kernel", total, by, kernel)
	}
	if got, want := cpuSplit(map[string]float64{"sqmkit": 250.4, "tc": 40, "sh": 1, "ip": 1}), " (sqmkit 250, tc 40, ip 1)"; got != want {
		t.Errorf("cpuSplit = %q, want %q", got, want)
	}
	if got := cpuSplit(map[string]float64{"bash": 1200}); got != "" {
		t.Errorf("one command split as %q", got)
	}
}

// TestTuneTraceChecks: tune on a recording passes only when it says the
// line moves, writes nothing and bounds a direction; the bounds are read
// from the UCI options its message gives.
func TestTuneTraceChecks(t *testing.T) {
	msg := "the download line moves: its seconds spread 9-fold. One rate would be wrong much of the time, so nothing was written: let autorate follow the line (LuCI: Network → SQM proof → Autorate; or option autorate '1', autorate_min_download '1200', autorate_max_download '9800')"
	floor, ceiling := tuneBounds(msg)
	if floor != [2]int{1200, 0} || ceiling != [2]int{9800, 0} {
		t.Fatalf("bounds %v..%v from %q", floor, ceiling, msg)
	}
	for _, tc := range []struct {
		name string
		x    tunedTrace
		ok   bool
	}{
		{"moves", tunedTrace{Moving: true, Floor: floor, Ceiling: ceiling}, true},
		{"one rate written", tunedTrace{Written: true}, false},
		{"moves, no bounds", tunedTrace{Moving: true}, false},
	} {
		ok := true
		for _, c := range tuneTraceChecks(tc.x, true) {
			ok = ok && c.OK
		}
		if ok != tc.ok {
			t.Errorf("%s: passed %v, want %v", tc.name, ok, tc.ok)
		}
	}
	if cs := tuneTraceChecks(tunedTrace{Written: true}, false); len(cs) != 0 {
		t.Errorf("a generated trace judged: %+v", cs)
	}
}
