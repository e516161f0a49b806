package search

import (
	"fmt"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// The confirming test is one full test at the rates a search chose. These
// rules judge it; the live session runs it.

// Confirmed takes the final goodput from the confirming test res: the
// bidirectional check may have lowered the rates below every step.
func (r *Result) Confirmed(res *bbresult.Result) {
	for _, ph := range res.Phases {
		switch Kind(ph.Name) {
		case Download:
			r.Download.GoodputKbit = int(ph.DownloadMbps * 1000)
		case Upload:
			r.Upload.GoodputKbit = int(ph.UploadMbps * 1000)
		}
	}
}

// ConfirmMiss is the first graded phase of a confirming test that misses
// the grade r tuned it for after its first Transient seconds, with the
// figures judged.
func (r *Result) ConfirmMiss(res *bbresult.Result) (Kind, Phase, bool) {
	for _, ph := range res.Phases {
		if ph.Grade == "" {
			continue
		}
		p, err := PhaseOf(res, Kind(ph.Name))
		if _, _, ok := bbresult.Steady(res, ph.Name, Transient, Graded); err != nil || !ok {
			continue
		}
		if !r.TargetOf(Kind(ph.Name)).Meets(p.AddedMedian, p.AddedP95) {
			return Kind(ph.Name), p, true
		}
	}
	return "", Phase{}, false
}

// MeasureAgain says whether a second phase could bring the mean of the
// missed phase p and it under t's bars: p is under twice each. The search
// kept the highest rate that passed, so its own phase there is the lucky
// one of its neighbours and is not pooled; a second confirm phase has no
// such bias (TestMeasureAgain).
func MeasureAgain(t Target, p Phase) bool {
	return p.AddedMedian < 2*t.MedianMs && p.AddedP95 < 2*t.P95Ms
}

// LowerAfterConfirm answers a confirming test's miss of phase k (figures p)
// by a little, once: the choices whose queue it was come down one
// BidirStep, what the search does with a miss of up to half a bar; a
// bidirectional miss on a saturated core, of any size, brings both down
// to fit the core (lowerForCPU). A larger miss, or a second, says the
// search's figures do not hold on this link now, and it returns false.
// confirmAgain false marks the lowering unconfirmed: the rates that missed
// by a little are the alternative, not the old ones (TestLowerAfterConfirm,
// and TestSessionConfirmMiss on a live session).
func (r *Result) LowerAfterConfirm(k Kind, p Phase, confirmAgain bool) bool {
	t := r.TargetOf(k)
	// a bidirectional miss on a saturated core is the router's ceiling,
	// whatever its size: both directions come down to fit it, as in the
	// search (lowerForCPU; TestLowerAfterConfirm's CPU-bound cases)
	cpu := k == Bidir && p.CPU != nil && p.CPU.Bound
	if r.ConfirmLowered > 0 || !cpu && missSteps(t, p.AddedMedian, p.AddedP95) > 1 {
		return false
	}
	lower := []*Choice{r.choice(k)}
	switch {
	case cpu:
		lower = []*Choice{&r.Download, &r.Upload}
	case k == Bidir:
		lower = lowered(p, t.MedianMs, &r.Download, &r.Upload)
	}
	share, how := BidirStep, "by a little"
	if cpu {
		share, how = r.lowerForCPU(*p.CPU, p), "on a saturated core"
	}
	for _, c := range lower {
		if !cpu {
			c.RateKbit = int(float64(c.RateKbit) * (1 - BidirStep))
		}
		c.also(RuleConfirmLowered, "; lowered %.0f%% after the confirming test's %s phase missed %s", 100*share, k, how)
		if !confirmAgain {
			c.also(RuleNoRoomToConfirm, " (the test-time budget left no room to confirm it again)")
			c.Rules = append(c.Rules, RuleBudgetBound)
		}
	}
	r.ConfirmLowered++
	return true
}

// Missed describes a confirming test's miss for the error that ends a tune.
func Missed(t Target, k Kind, p Phase, again bool) string {
	judged := fmt.Sprintf("after its first %g s", Transient)
	if again {
		judged = fmt.Sprintf("the mean of it and one more, each after its first %g s", Transient)
	}
	return fmt.Sprintf("the confirming test missed %s in its %s phase (+%.1f/+%.1f ms, %s); nothing written", t.Name, k, p.AddedMedian, p.AddedP95, judged)
}
