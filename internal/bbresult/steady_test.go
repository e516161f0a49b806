package bbresult

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// Steady leaves the phase's start out: a transient of 100 ms RTT in its
// first second, 21 ms after, over an idle 20 ms.
func TestSteady(t *testing.T) {
	r := &Result{Phases: []Phase{
		{Name: PhaseIdleBefore, Start: 0, End: 2},
		{Name: PhaseDownload, Start: 2, End: 8},
	}}
	for i := 0; i < 800; i++ {
		tm := float64(i) / 100
		rtt := 20.0
		switch {
		case tm >= 2 && tm < 3:
			rtt = 100
		case tm >= 3:
			rtt = 21
		}
		p := Probe{T: tm, RTT: rtt}
		if i%50 == 7 {
			p.Lost, p.RTT = "down", 0 // lost probes never count
		}
		r.Samples.Probes = append(r.Samples.Probes, p)
	}
	for _, c := range []struct {
		skip, med, p95 float64
	}{{1.5, 1, 1}, {0, 1, 80}} {
		med, p95, ok := Steady(r, PhaseDownload, c.skip, 0)
		if !ok || math.Abs(med-c.med) > 1e-9 || math.Abs(p95-c.p95) > 1e-9 {
			t.Errorf("skip %v: %v/%v %v, want %v/%v", c.skip, med, p95, ok, c.med, c.p95)
		}
	}
	if _, _, ok := Steady(r, PhaseUpload, 1, 0); ok {
		t.Error("a missing phase is not ok")
	}
}

// A short phase whose start-up still drained past skip is judged as the
// long phase it stands for; one whose delay rose, or fell by little, or
// that is as long already, as it is.
func TestSteadyStandsForLong(t *testing.T) {
	phase := func(end float64, added func(tm float64) float64) *Result {
		r := &Result{Phases: []Phase{
			{Name: PhaseIdleBefore, Start: 0, End: 2},
			{Name: PhaseBidir, Start: 2, End: end},
		}}
		for i := 0; i < int(end*100); i++ {
			tm := float64(i) / 100
			rtt := 20.0
			if tm >= 2 {
				rtt += added(tm)
			}
			r.Samples.Probes = append(r.Samples.Probes, Probe{T: tm, RTT: rtt})
		}
		return r
	}
	// judged from 3.5 s; the first half of a 6 s phase's judged part ends
	// at 5.75 s
	drain := func(tm float64) float64 {
		if tm < 5.75 {
			return 100
		}
		return 10
	}
	rise := func(tm float64) float64 { return 110 - drain(tm) }
	small := func(tm float64) float64 { return drain(tm)/25 - 0.4 } // 3.6, then 0
	// a start-up that ends 1 s into the judged part: its first half's
	// p95, not its median
	tail := func(tm float64) float64 {
		if tm < 4.5 {
			return 40
		}
		return 1
	}
	for _, c := range []struct {
		name     string
		r        *Result
		long     float64
		med, p95 float64
	}{
		{"draining, judged as it is", phase(8, drain), 0, 55, 100},
		// 225 probes at +100 of 2925: +10 the median, +100 the p95, as
		// 2.25 s of start-up are in a 30 s phase
		{"draining, as the 30 s phase", phase(8, drain), 30, 10, 100},
		{"rising", phase(8, rise), 30, 55, 100},
		{"a small fall", phase(8, small), 30, 1.8, 3.6},
		{"a tail draining, judged as it is", phase(8, tail), 0, 1, 40},
		// 100 probes at +40 of 2925
		{"a tail draining, as the 30 s phase", phase(8, tail), 30, 1, 1},
		// the 30 s phase itself reads as the short one judged as it
		{"long already", phase(32, drain), 30, 10, 100},
	} {
		med, p95, ok := Steady(c.r, PhaseBidir, 1.5, c.long)
		if !ok || math.Abs(med-c.med) > 1e-9 || math.Abs(p95-c.p95) > 1e-9 {
			t.Errorf("%s: +%v/+%v %v, want +%v/+%v", c.name, med, p95, ok, c.med, c.p95)
		}
	}
}

// A recorded confirming test's 6 s download phase (lab adsl-atm ×
// fq_codel, testdata/confirm-download-drain.json): past 1.5 s its
// start-up drained for another second and made its p95, not its median.
// Judged as the 30 s phase it meets A+; judged as it is, it does not.
func TestSteadyRecordedTail(t *testing.T) {
	b, err := os.ReadFile("testdata/confirm-download-drain.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		long float64
		pass bool
	}{{0, false}, {30, true}} {
		med, p95, ok := Steady(&r, PhaseDownload, 1.5, c.long)
		if !ok || (med <= 5 && p95 <= 15) != c.pass {
			t.Errorf("long %v: +%.1f/+%.1f %v, want A+ %v", c.long, med, p95, ok, c.pass)
		}
	}
}
