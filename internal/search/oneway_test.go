package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNotBloated(t *testing.T) {
	s := newSim()
	s.flat = true
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.RateKbit != r.Download.Line.RateKbit || !r.Download.Has(RuleNotBloated) {
		t.Errorf("flat link: %d of line %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, r.Download.Why)
	}
	// it looked above the measured line before calling it unbloated
	above := 0
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.05 && st.Pass {
			above++
		}
	}
	if above != 1 || s.rateD != float64(r.Download.Line.RateKbit) {
		t.Errorf("flat link: %d passing steps above the line, link left at %v: %+v", above, s.rateD, r.Steps)
	}
}

// A line rate that passes with its delay near a bar is the knee: no
// step above it is tried, and the rate is one step under it.
func TestLineNearKnee(t *testing.T) {
	s := newSim()
	s.knee, s.slopeMs = 0.9995, 40 // at 100 %: +3 ms median, +8 ms p95
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range r.Steps {
		if st.Kind != Bidir && st.Share > 1.001 {
			t.Errorf("a step above the line: %+v", st)
		}
	}
	// and a knee at the line is taken one step (1 %) under it
	if want := r.Download.Line.RateKbit - int(math.Round(0.01*float64(r.Download.Line.RateKbit))); r.Download.RateKbit != want ||
		!r.Download.Has(RuleKneeAtLine) || !r.Download.Has(RuleUnderLine) {
		t.Errorf("download %d of line %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, r.Download.Why)
	}
}

// A boosted line's knee is its sustained rate, and a short step above it
// passes on the bucket, which refills between steps: tune does not look
// above such a line and takes the knee one step under it.
func TestBoostedLineNoLookAbove(t *testing.T) {
	s := newSim()
	s.boost, s.boostSteps, s.knee, s.slopeMs = 1.2, true, 1.0, 40
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.Line.BoostKbit == 0 {
		t.Fatalf("the boost went unnoticed: %+v", r.Download.Line)
	}
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.001 {
			t.Errorf("a download step above the boosted line: %+v", st)
		}
	}
	if want := r.Download.Line.RateKbit - int(math.Round(0.01*float64(r.Download.Line.RateKbit))); r.Download.RateKbit != want ||
		!r.Download.Has(RuleBoost) {
		t.Errorf("download %d of line %d, want %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, want, r.Download.Why)
	}
}

// A step above a line measured right passes when its queue has not grown
// in a short phase, carrying no more than the line: that is not a knee
// above the line, and tune takes the line one step under.
func TestAboveLineUncarried(t *testing.T) {
	s := newSim()
	s.knee, s.slopeMs, s.lateQueue = 1.0, 40, 1.05
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := r.Download
	if want := d.Line.RateKbit - int(math.Round(0.01*float64(d.Line.RateKbit))); d.RateKbit != want ||
		!d.Has(RuleUncarried) {
		t.Errorf("download %d of line %d, want %d: %s", d.RateKbit, d.Line.RateKbit, want, d.Why)
	}
	// no bisection above the line: its steps cannot tell either
	above := 0
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.001 {
			above++
		}
	}
	if above != 2 {
		t.Errorf("%d download steps above the line, want the two looks (103 %%, 110 %%): %+v", above, r.Steps)
	}
}

// A pass above a line read low that carried more than the line is kept
// when the budget ends the look above it, one step under: taking the
// line would leave the rate a few percent under the link's best.
func TestAboveLineCarriedOutOfBudget(t *testing.T) {
	s := newSim()
	s.lineRead, s.knee, s.slopeMs = 0.96, 0.995, 40
	r := &Result{Target: APlus}
	c := searchConfig()
	c.MaxSteps, c.Resolution = 3, 0.01 // the budget ends after the look at 103 %
	sr := &searcher{l: s, c: c, r: r}
	s.SetRates(context.Background(), c.OpenDown, c.OpenUp)
	line, err := sr.line(context.Background(), Download)
	if err != nil {
		t.Fatal(err)
	}
	r.Download.Line = line
	if err := sr.direction(context.Background(), Download); err != nil {
		t.Fatal(err)
	}
	at := func(share float64) int { return int(math.Round(share * float64(line.RateKbit))) }
	d := r.Download
	if want := at(1.03) - at(0.01); d.RateKbit != want || !d.Has(RuleBudgetBound) || s.rateD != float64(want) {
		t.Errorf("download %d of line %d, link at %.0f, want %d: %s", d.RateKbit, line.RateKbit, s.rateD, want, d.Why)
	}
	if best := s.best(s.down, APlus); float64(d.RateKbit) > 1.01*float64(best) || float64(d.RateKbit) < 0.97*float64(best) {
		t.Errorf("download %d, the best is %d", d.RateKbit, best)
	}
}

func TestNoRate(t *testing.T) {
	s := newSim()
	s.knee = 0.3
	_, err := Search(context.Background(), s, searchConfig())
	if !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "50%") {
		t.Errorf("err %v", err)
	}
}

// TestSettlesForWeaker: an upload that misses A+ at every rate (ADSL's
// 1 Mbit/s ATM upstream) is tuned for A, the best grade the link allows,
// at the highest rate that keeps it; the download keeps A+, and the
// bidirectional phase, which holds the upload's queue, is judged on A.
func TestSettlesForWeaker(t *testing.T) {
	s := newSim()
	s.upFloor = 10
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.Target != APlus || r.Download.OutOfReach != "" {
		t.Errorf("download tuned for %q (%q), want A+", r.Download.Target.Name, r.Download.OutOfReach)
	}
	if r.Upload.Target != A || !strings.Contains(r.Upload.OutOfReach, "A+") || !r.Upload.Has(RuleOutOfReach) {
		t.Errorf("upload tuned for %q: %q, %q", r.Upload.Target.Name, r.Upload.OutOfReach, r.Upload.Why)
	}
	for _, d := range []struct {
		k    Kind
		got  int
		line float64
		t    Target
	}{{Download, r.Download.RateKbit, s.down, APlus}, {Upload, r.Upload.RateKbit, s.up, A}} {
		if want := s.best(d.line, d.t); math.Abs(float64(d.got-want)) > 0.015*d.line {
			t.Errorf("%s: %d kbit/s, want about %d (the highest meeting %s)", d.k, d.got, want, d.t.Name)
		}
	}
	for _, st := range r.Steps {
		if st.Kind == Bidir && st.Target != "A" {
			t.Errorf("bidirectional step judged on %q, want A", st.Target)
		}
	}
	if r.TargetOf(Bidir) != A || r.TargetOf(Download) != APlus || r.TargetOf(Upload) != A {
		t.Errorf("targets %v %v %v", r.TargetOf(Download), r.TargetOf(Upload), r.TargetOf(Bidir))
	}
	// the delay did not come down from 95 % to 85 %: no step at the floor
	for _, st := range r.Steps {
		if st.Kind == Upload && st.Target == "A+" && st.Share < Bracket-0.01 {
			t.Errorf("upload tried %.0f%% for A+ after a flat delay at 95 and 85 %%", 100*st.Share)
		}
	}
	if !strings.Contains(r.Upload.OutOfReach, "did not lower the delay") {
		t.Errorf("out of reach: %q", r.Upload.OutOfReach)
	}
	// A is the last grade it settles for: a link that misses A too has
	// no answer.
	s = newSim()
	s.upFloor = 40
	if _, err := Search(context.Background(), s, searchConfig()); !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "(A)") {
		t.Errorf("upload missing A too: %v", err)
	}
}

// A line whose own packet time puts A+ out of reach (half a full-size
// packet's time over its 5 ms median) is searched against A at once, with
// no steps spent showing it; a line a little faster is searched against
// A+ first.
func TestPacketTimeSettlesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		up        float64
		wantFirst string // the target of the upload's first step
	}{{906, "A"}, {2000, "A+"}} {
		t.Run(fmt.Sprint(tc.up), func(t *testing.T) {
			s := newSim()
			s.up, s.upFloor = tc.up, 8
			r, err := Search(context.Background(), s, searchConfig())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(r.Steps, func(st Step) bool { return st.Kind == Upload })
			if i < 0 || r.Steps[i].Target != tc.wantFirst {
				t.Fatalf("upload's first step %+v, want it judged on %s", r.Steps[max(i, 0)], tc.wantFirst)
			}
			if r.Upload.Target != A || !r.Upload.Has(RuleOutOfReach) {
				t.Errorf("upload tuned for %q: %q", r.Upload.Target.Name, r.Upload.Why)
			}
			if tc.wantFirst == "A" && !strings.Contains(r.Upload.OutOfReach, "packet takes 13.4 ms") {
				t.Errorf("out of reach: %q", r.Upload.OutOfReach)
			}
			if r.Download.Target != APlus {
				t.Errorf("download tuned for %q", r.Download.Target.Name)
			}
		})
	}
}

// A knee at the measured line, or within lineError under it, is taken one
// step under the highest rate that passed; a knee farther below the line is
// that rate.
func TestUnderLine(t *testing.T) {
	for _, tc := range []struct {
		knee  float64 // the sim passes up to half a percent above it
		under bool
	}{{1, true}, {0.99, true}, {0.965, false}, {0.955, false}} {
		s := newSim()
		s.knee = tc.knee
		r, err := Search(context.Background(), s, searchConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []Kind{Download, Upload} {
			c := r.choice(k)
			line := c.Line.RateKbit
			best := 0
			for _, st := range r.Steps {
				if st.Kind == k && st.Pass && st.RateKbit <= line {
					best = max(best, st.RateKbit)
				}
			}
			want := best
			if tc.under {
				want -= int(math.Round(0.01 * float64(line)))
			}
			if under := c.Has(RuleUnderLine); under != tc.under || c.RateKbit != want {
				t.Errorf("knee %.3f, %s: %d of line %d (highest pass %d), want %d: %s", tc.knee, k, c.RateKbit, line, best, want, c.Why)
			}
		}
	}
}
