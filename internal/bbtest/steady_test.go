package bbtest

import (
	"math"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Steady leaves the phase's start out: a transient of 100 ms RTT in its
// first second, 21 ms after, over an idle 20 ms.
func TestSteady(t *testing.T) {
	r := &bbresult.Result{Phases: []bbresult.Phase{
		{Name: bbresult.PhaseIdleBefore, Start: 0, End: 2},
		{Name: bbresult.PhaseDownload, Start: 2, End: 8},
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
		p := bbresult.Probe{T: tm, RTT: rtt}
		if i%50 == 7 {
			p.Lost, p.RTT = "down", 0 // lost probes never count
		}
		r.Samples.Probes = append(r.Samples.Probes, p)
	}
	for _, c := range []struct {
		skip, med, p95 float64
	}{{1.5, 1, 1}, {0, 1, 80}} {
		med, p95, ok := Steady(r, bbresult.PhaseDownload, c.skip)
		if !ok || math.Abs(med-c.med) > 1e-9 || math.Abs(p95-c.p95) > 1e-9 {
			t.Errorf("skip %v: %v/%v %v, want %v/%v", c.skip, med, p95, ok, c.med, c.p95)
		}
	}
	if _, _, ok := Steady(r, bbresult.PhaseUpload, 1); ok {
		t.Error("a missing phase is not ok")
	}
}
