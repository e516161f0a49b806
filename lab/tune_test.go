package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

func TestAgainstSweep(t *testing.T) {
	for _, c := range []struct {
		tuned, best int
		ok          bool
	}{
		{9700, 10000, true}, {10100, 10000, true}, {9699, 10000, false}, {10101, 10000, false},
		{10000, 0, false}, // the sweep found no A+ rate: nothing to be within
	} {
		if got := againstSweep("download", c.tuned, c.best); got.OK != c.ok {
			t.Errorf("tuned %d, best %d: %+v", c.tuned, c.best, got)
		}
	}
}

// A direction the sweep found nothing for prints no share of it (not
// 654300 % of 0, as adsl-atm × nss did) and says how to reach further.
func TestSweepShare(t *testing.T) {
	for _, c := range []struct {
		name     string
		sw       swept
		want     []string
		wantNone bool
	}{
		{"both found", swept{From: 80, To: 100, BestDown: 10000, BestUp: 2000}, []string{"sweep best 10000/2000", "(tune at 98.0%/100.0% of it)"}, false},
		{"none found", swept{From: 80, To: 100}, []string{"sweep best 0/0", "(tune at none/none of it)", "no passing rate in 80-100%"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sweepShare(9800, 2000, &c.sw)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			if strings.Contains(got, "--from") != c.wantNone {
				t.Errorf("%q: the --from hint wanted %v", got, c.wantNone)
			}
		})
	}
}

// make lab holds tune to its acceptance: a tune beside a sweep on every
// profile with every sqmkit backend, the sweep reaching down to 70 %.
func TestAllPlanTunes(t *testing.T) {
	profiles := []string{"adsl-atm", "cable", "fiber"}
	plan := allPlan(profiles, "/repo")
	for _, p := range profiles {
		i := slices.IndexFunc(plan, func(r planRun) bool { return r.Profile == p && r.Mode == "tune" })
		if i < 0 {
			t.Fatalf("%s: no tune run in %+v", p, plan)
		}
		r := plan[i]
		if !slices.Equal(r.Backends, sqmkitBackends) || r.Sweep == nil || r.Sweep.From != 70 || r.Sweep.To != 100 || r.Sweep.Stop != 3 || r.IPv6 {
			t.Errorf("%s: tune run %+v (sweep %+v)", p, r, r.Sweep)
		}
		if !slices.ContainsFunc(plan, func(r planRun) bool { return r.Profile == p && r.Mode == "" }) {
			t.Errorf("%s: no graded run", p)
		}
	}
	// a line faster than the guest: tune alone, no sweep, no graded run
	plan = allPlan(append(profiles, "fiber-fast"), "/repo")
	var runs []planRun
	for _, r := range plan {
		if r.Profile == "fiber-fast" {
			runs = append(runs, r)
		}
	}
	if len(runs) != 1 || runs[0].Mode != "tune" || runs[0].Sweep != nil || !slices.Contains(runs[0].Backends, "cake") {
		t.Errorf("fiber-fast's runs: %+v", runs)
	}
}

// Without a sweep, tune's rate is held to a floor of the line (make
// test's regression guard): 90 % of it, and no more than tune's own look
// above it; under 90 % only when a test at a rate under 90 % (the lab's at
// the tuned rate, or tune's confirming test above it) shows a phase the
// direction loads over tune's target (the link left no room), a
// bidirectional one only when the delay was that direction's queue.
func TestAgainstLine(t *testing.T) {
	calm := &accept.Phase{Name: accept.Bidir, AddedMedian: 3.7, AddedP95: 10.7}
	over := &accept.Phase{Name: accept.Bidir, AddedMedian: 6.0, AddedP95: 17.6} // a make test miss with no one-way split
	overDown := &accept.Phase{Name: accept.Bidir, AddedMedian: 6.0, AddedP95: 17.6, AddedDown: 4.3, AddedUp: 1.5}
	overUp := &accept.Phase{Name: accept.Bidir, AddedMedian: 9.0, AddedP95: 17.6, AddedDown: 0.5, AddedUp: 8.2}
	tail := &accept.Phase{Name: accept.Download, AddedMedian: 2.0, AddedP95: 15.1}
	upOnly := &accept.Phase{Name: accept.Upload, AddedMedian: 6.0, AddedP95: 9}
	// a confirm at 35652 read +6.1/+16.5 (down +4.2, up +1.5), tune lowered
	// the download to 34938, and the lab's test there met A+
	confirmDown := &accept.Phase{Name: accept.Bidir, AddedMedian: 6.1, AddedP95: 16.5, AddedDown: 4.2, AddedUp: 1.5}
	for _, c := range []struct {
		name        string
		up          bool // the upload's floor, not the download's
		tuned, line int
		phases      []*accept.Phase // the lab's test at the tuned rates
		confirm     *measured       // tune's confirming test above them
		ok          bool
	}{
		{"96 %", false, 38078, 40000, []*accept.Phase{calm}, nil, true},
		{"90 %", false, 36000, 40000, []*accept.Phase{calm}, nil, true},
		{"under 90 %", false, 35999, 40000, []*accept.Phase{calm}, nil, false},
		{"nss before the transient rule: 86 %", false, 34209, 40000, []*accept.Phase{calm, nil}, nil, false},
		{"no phase graded", false, 34209, 40000, nil, nil, false},
		{"85 %, bidirectional over A+ there", false, 34156, 40000, []*accept.Phase{calm, over}, nil, true},
		{"85 %, bidirectional over A+ in the download's queue", false, 34156, 40000, []*accept.Phase{overDown}, nil, true},
		{"85 %, bidirectional over A+ in the upload's queue", false, 34156, 40000, []*accept.Phase{overUp}, nil, false},
		{"upload 85 %, bidirectional over A+ in the upload's queue", true, 6800, 8000, []*accept.Phase{overUp}, nil, true},
		{"upload 85 %, bidirectional over A+ in the download's queue", true, 6800, 8000, []*accept.Phase{overDown}, nil, false},
		{"upload 85 %, its own phase over A+", true, 6800, 8000, []*accept.Phase{upOnly, overDown}, nil, true},
		{"85 %, a p95 over A+ there", false, 34156, 40000, []*accept.Phase{tail}, nil, true},
		{"110 %", false, 44000, 40000, []*accept.Phase{over}, nil, true},
		{"over 110 %", false, 44001, 40000, []*accept.Phase{over}, nil, false},
		{"nothing tuned", false, 0, 40000, []*accept.Phase{over}, nil, false},
		{"no target in tune's report", false, 34156, 40000, []*accept.Phase{over}, nil, false},
		{"87 %, the confirm at 89 % over A+ in the download's queue", false, 34938, 40000, []*accept.Phase{calm}, &measured{35652, "tune's confirming test", confirmDown}, true},
		// tune's smallest lowering (2 %) from a miss at 91.75 % lands under the floor, from 92 % it does not
		{"88 %, the confirm at 91.75 % over A+", false, 35280, 40000, []*accept.Phase{calm}, &measured{36700, "tune's confirming test", confirmDown}, true},
		{"87 %, the confirm at 92 % over A+: one lowering from it stays over the floor", false, 35280, 40000, []*accept.Phase{calm}, &measured{36800, "tune's confirming test", confirmDown}, false},
		{"upload 87 %, the confirm at 89 % over A+ in the download's queue", true, 6960, 8000, []*accept.Phase{calm}, &measured{7130, "tune's confirming test", confirmDown}, false},
		{"87 %, the confirm at 89 % met A+", false, 34938, 40000, []*accept.Phase{calm}, &measured{35652, "tune's confirming test", calm}, false},
	} {
		target := search.APlus
		if strings.HasPrefix(c.name, "no target") {
			target = search.Target{}
		}
		dir := map[bool]string{false: accept.Download, true: accept.Upload}[c.up]
		var seen []measured
		for _, p := range c.phases {
			seen = append(seen, measured{c.tuned, "the lab's test", p})
		}
		if c.confirm != nil {
			seen = append(seen, *c.confirm)
		}
		got := againstLine(dir, c.tuned, c.line, target, seen...)
		if got.OK != c.ok {
			t.Errorf("%s: %+v", c.name, got)
		}
		if got.OK && got.Got < minLineShare && !strings.Contains(got.Want, "over A+ (5/15)") {
			t.Errorf("%s: a floor waived without saying why: %q", c.name, got.Want)
		}
	}
}

// make test's floors read tune's outcome: the confirming test counts for
// the direction it ran under the floor in, and only where it ran above the
// written rate.
func TestFloorChecks(t *testing.T) {
	lab := accept.Measurement{Phases: []accept.Phase{
		{Name: accept.Download, AddedMedian: 2.2, AddedP95: 9.6},
		{Name: accept.Upload, AddedMedian: 0.7, AddedP95: 2.8},
		{Name: accept.Bidir, AddedMedian: 4.3, AddedP95: 12.1, AddedDown: 3.1, AddedUp: 1.0},
	}}
	confirm := &bbresult.Result{Phases: []bbresult.Phase{
		{Name: bbresult.PhaseDownload, AddedMedian: 1.3, AddedP95: 9.1},
		{Name: bbresult.PhaseBidir, AddedMedian: 6.1, AddedP95: 16.5, AddedDown: 4.2, AddedUp: 1.5},
	}}
	outcome := func(down, up int, at config.Rates, c *bbresult.Result) tune.Outcome {
		return tune.Outcome{Search: &search.Result{
			Download: search.Choice{RateKbit: down, Target: search.APlus},
			Upload:   search.Choice{RateKbit: up, Target: search.APlus},
		}, ConfirmedAt: at, Confirm: c}
	}
	for _, tc := range []struct {
		name     string
		o        tune.Outcome
		down, up bool
	}{
		{"the confirm at 89 % missed", outcome(34938, 7890, config.Rates{Download: 35652, Upload: 7890}, confirm), true, true},
		{"no confirming test", outcome(34938, 7890, config.Rates{}, nil), false, true},
		{"the confirm ran at the written rates", outcome(34938, 7890, config.Rates{Download: 34938, Upload: 7890}, confirm), false, true},
		// the same miss was the download's queue: it does not excuse an upload under its floor
		{"upload under its floor", outcome(38000, 6960, config.Rates{Download: 38000, Upload: 7130}, confirm), true, false},
	} {
		cs := floorChecks(lab, tc.o, 40000, 8000)
		if len(cs) != 2 || cs[0].OK != tc.down || cs[1].OK != tc.up {
			t.Errorf("%s: %+v", tc.name, cs)
			continue
		}
		if tc.down && cs[0].Got < minLineShare && !strings.Contains(cs[0].Want, "35652 kbit/s (89.1 %, tune's confirming test)") {
			t.Errorf("%s: the waiver does not name the confirm: %q", tc.name, cs[0].Want)
		}
	}

	// tune's bidirectional steps read +7.8 at 38797, +5.8/+14.2 at 37245 (a
	// mean of two) and +5.3/+16.2 at 36500 (91.25 %, down +3.3, up +1.5) with
	// no budget left; it wrote 35770 / 7936 (89.4 %), the confirm there met
	// A+, and so did the lab's test
	passed := &bbresult.Result{Phases: []bbresult.Phase{
		{Name: bbresult.PhaseDownload, AddedMedian: 0.3, AddedP95: 8.4},
		{Name: bbresult.PhaseBidir, AddedMedian: 1.8, AddedP95: 12.1, AddedDown: 1.2, AddedUp: 0.5},
	}}
	bidir := func(down, up int, med, p95, d, u float64) search.Step {
		return search.Step{Kind: search.Bidir, RateKbit: down, Other: up, AddedMedian: med, AddedP95: p95, AddedDown: d, AddedUp: u}
	}
	at91 := bidir(36500, 7936, 5.3, 16.2, 3.3, 1.5)
	for _, tc := range []struct {
		name     string
		steps    []search.Step
		down, up bool
	}{
		{"a step at 91.25 % missed in the download's queue", []search.Step{bidir(38797, 7936, 7.8, 13.2, 7.2, 1.2), bidir(37245, 7936, 5.8, 14.2, 4.6, 1.3), at91}, true, true},
		{"the lowest miss at 93.1 %", []search.Step{bidir(38797, 7936, 7.8, 13.2, 7.2, 1.2), bidir(37245, 7936, 5.8, 14.2, 4.6, 1.3)}, false, true},
		{"a step at 91.25 % missed in the upload's queue", []search.Step{bidir(36500, 7936, 5.3, 16.2, 0.5, 4.8)}, false, true},
		{"a step at 91.25 % met A+", []search.Step{bidir(36500, 7936, 4.1, 11.0, 3.0, 1.1)}, false, true},
		{"a download step at 91.25 % missed", []search.Step{{Kind: search.Download, RateKbit: 36500, AddedMedian: 6.2, AddedP95: 12.0}}, true, true},
		{"an upload step at 91.25 % of the download's line missed", []search.Step{{Kind: search.Upload, RateKbit: 36500, AddedMedian: 6.2, AddedP95: 12.0}}, false, true},
		// the upload written at 89 %: a bidirectional step counts at its upload rate
		{"upload at 89 %, a step with the upload at 91.25 % missed in its queue", []search.Step{bidir(38000, 7300, 6.0, 12.0, 0.5, 5.2)}, false, true},
	} {
		up := 7936
		if strings.HasPrefix(tc.name, "upload at 89 %") {
			up = 7120
		}
		o := outcome(35770, up, config.Rates{Download: 35770, Upload: up}, passed)
		o.Search.Steps = tc.steps
		cs := floorChecks(lab, o, 40000, 8000)
		if len(cs) != 2 || cs[0].OK != tc.down || cs[1].OK != tc.up {
			t.Errorf("%s: %+v", tc.name, cs)
			continue
		}
		if tc.down && !strings.Contains(cs[0].Want, "36500 kbit/s (91.2 %, tune's ") {
			t.Errorf("%s: the waiver does not name tune's step: %q", tc.name, cs[0].Want)
		}
	}
}

// A tune that said CPU-bound at 30 Mbit/s: with the host seeing the
// busiest vCPU run 92 % of that phase the lab's ceiling is 32.6 Mbit/s and
// the product's is within 20 % of it; at 60 % (the host's gauge says the
// guest had room) it is not; rates at the line fail the first check.
// cpuVerdicts finds the bound phases among the lines' and the
// bidirectional one's.
func TestCPUChecks(t *testing.T) {
	c := bbresult.PhaseCPU{Phase: "download", ShapedMbps: 30, Bound: true}
	for _, tc := range []struct {
		busiest      float64
		tuned, line  int
		under, agree bool
	}{
		{0.92, 60000, 300000, true, true},
		{0.60, 60000, 300000, true, false},
		{0, 60000, 300000, true, false},
		{0.92, 300000, 300000, false, true},
	} {
		under := cpuUnderLine(tc.tuned, tc.line)
		agree, lab := cpuCeilingCheck(c, tc.busiest)
		if under.OK != tc.under || agree.OK != tc.agree {
			t.Errorf("busiest %.2f, tuned %d of %d: %+v %+v", tc.busiest, tc.tuned, tc.line, under, agree)
		}
		if tc.busiest == 0.92 && math.Abs(lab-30/0.92) > 1e-9 {
			t.Errorf("lab ceiling %v, want %v", lab, 30/0.92)
		}
	}
	r := &search.Result{}
	if len(cpuVerdicts(r)) != 0 {
		t.Error("a verdict without a bound phase")
	}
	r.Download.Line.CPU = &bbresult.PhaseCPU{Phase: "download"} // measured, not bound
	up := bbresult.PhaseCPU{Phase: "upload", Bound: true}
	r.Upload.Line.CPU, r.BidirCPU = &up, &c
	if v := cpuVerdicts(r); len(v) != 2 || v[0] != &up || v[1] != &c {
		t.Errorf("verdicts %+v, want the upload line's and the bidirectional phase's", v)
	}
}

// The doctor's JSON after a CPU-bound tune passes with its cpu-bound
// warning (a core in the evidence, a fix); an OK headroom finding, a
// warning without a fix or no JSON fail.
func TestDoctorCPUCheck(t *testing.T) {
	js := func(fs ...doctor.Finding) string {
		b, _ := json.Marshal(doctor.Diagnosis{Findings: fs})
		return string(b)
	}
	ev := []string{"tune of 2026-12-01 23:00 UTC: download at 267.0 Mbit/s shaped, cpu1 busy 95% (66% softirq) of 2 cores"}
	for _, c := range []struct {
		out string
		ok  bool
	}{
		{js(doctor.Finding{Severity: doctor.Warn, ID: "cpu-bound", Evidence: ev, Fix: "This router shapes about 267 Mbit/s with cake; fq_codel ..."}), true},
		{js(doctor.Finding{Severity: doctor.OK, ID: "cpu-headroom", Evidence: ev}), false},
		{js(doctor.Finding{Severity: doctor.Warn, ID: "cpu-bound", Evidence: ev}), false},
		{"sqmkit doctor: no queue", false},
	} {
		if got := doctorCPUCheck(c.out); got.OK != c.ok {
			t.Errorf("%.80s: %+v, want ok %v", c.out, got, c.ok)
		}
	}
}
