package search

import (
	"context"
	"fmt"
	"math"
)

// Floor is the lowest share of the line searched: below half the line, a
// link that still misses the target has a problem a shaper cannot fix
// (Wi-Fi in the path, a saturated CPU).
const Floor = 0.5

// Bracket is where the search looks first below 95 %.
const Bracket = 0.85

// aboveLine are the shares of the measured line tried when the line rate
// itself meets the target: 3 % covers a line read a little low (a stall
// in its window, a modem that paces its first seconds); when that passes
// too, 10 % tells a line that does not bloat from one read far too low.
var aboveLine = []float64{1.03, 1.10}

// direction bisects direction k's rate between Floor and 110 % of the
// measured line, starting where the usual advice does (95 %), to
// c.Resolution.
func (s *searcher) direction(ctx context.Context, k Kind) error {
	c := s.choice(k)
	c.Rule95 = at(c, 0.95)
	st, err := s.try(ctx, k, c.Rule95)
	if err != nil {
		return err
	}
	var lo, hi int // lo meets the target, hi does not
	if st.Pass {
		c.Rule95Goodput = st.GoodputKbit
		var done bool
		if lo, hi, done, err = s.fromLine(ctx, k, st); err != nil || done {
			return err
		}
	} else if lo, hi, err = s.bracket(ctx, k, st); err != nil {
		return err
	}
	return s.bisect(ctx, k, lo, hi)
}

// at is share of c's measured line rate.
func at(c *Choice, share float64) int { return int(math.Round(share * float64(c.Line.RateKbit))) }

// resolution is the width a bisection of c's rate ends at.
func (s *searcher) resolution(c *Choice) int { return max(at(c, s.c.Resolution), 1) }

// fromLine goes on from a pass at 95 %: the line rate, and above it when
// the line meets the target well under its bars. done: the rate is set.
func (s *searcher) fromLine(ctx context.Context, k Kind, at95 Step) (lo, hi int, done bool, err error) {
	c, t, line := s.choice(k), s.target(k), s.choice(k).Line.RateKbit
	top, err := s.try(ctx, k, line)
	if err != nil {
		return 0, 0, false, err
	}
	lo, hi, c.GoodputKbit = c.Rule95, line, at95.GoodputKbit
	if !top.Pass {
		return lo, hi, false, nil
	}
	lo, hi, c.GoodputKbit = line, 0, top.GoodputKbit
	a, err := s.aboveLine(ctx, k, top)
	if err != nil {
		return 0, 0, false, err
	}
	if a.lo > 0 {
		lo, c.GoodputKbit = a.lo, a.goodput
	}
	if a.hi > 0 {
		hi = a.hi
	}
	switch {
	case hi == 0 && a.short && lo > line:
		// A pass above the line that carried more than it says the line
		// read low: taken as a knee found there, whose rate no step above
		// bounds (TestAboveLineCarriedOutOfBudget).
		c.RateKbit = lo
		c.because(RuleAboveLine, "the highest rate meeting %s that the link showed it carries: %d kbit/s, above the measured line", t.Name, lo)
		c.also(RuleBudgetBound, "; the test-time budget left no step to look further above it")
		s.underLine(c, s.resolution(c))
	case hi == 0 && a.short:
		c.RateKbit = line
		c.because(RuleAtLine, "the line rate meets %s", t.Name)
		c.also(RuleBudgetBound, "; the test-time budget left no step to look further above it")
	case hi != 0 && a.uncarried != nil:
		// A higher rate missed, so the link does bloat, and the pass above
		// the line was a queue that had not grown yet in a short step: no
		// rate between can be told from it either.
		c.RateKbit = lo
		c.because(RuleUncarried, "the highest rate meeting %s that the link showed it carries: %d kbit/s; %d kbit/s met it too but carried no more than the line measured (%d kbit/s goodput against %d), a queue that had not grown yet in a short step, and %d kbit/s missed",
			t.Name, lo, a.uncarried.RateKbit, a.uncarried.GoodputKbit, c.Line.GoodputKbit, hi)
		s.underLine(c, s.resolution(c))
	case hi == 0 && a.passed == len(aboveLine):
		c.RateKbit, c.GoodputKbit = line, top.GoodputKbit
		c.because(RuleNotBloated, "the line meets %s even %.0f%% above its measured rate: not bloated here, shaped at the line rate",
			t.Name, 100*(aboveLine[len(aboveLine)-1]-1))
	case hi == 0:
		c.RateKbit = line
		c.because(RuleKneeAtLine, "the line rate meets %s with its delay near a bar already: the knee is there", t.Name)
		if c.Line.BoostKbit > 0 {
			c.because(RuleBoost, "the line rate meets %s; above it a short step measures the boost's bucket, not the line", t.Name)
		}
		s.underLine(c, s.resolution(c))
	default:
		return lo, hi, false, nil
	}
	return 0, 0, true, s.set(ctx, k, c.RateKbit)
}

// above is what the steps above the line found: the highest pass that
// carried more than the line (lo, its goodput), the first miss (hi), how
// many passed, whether the budget cut them short, and a pass that carried
// no more than the line.
type above struct {
	lo, goodput, hi, passed int
	short                   bool
	uncarried               *Step
}

// aboveLine looks above a line rate that met the target (top): either the
// line does not bloat, or it was measured low and the knee is above it.
// Not when the line's delay already rose toward a bar (the knee is there),
// and not on a boosted line, whose bucket refills in every idle second
// between steps, so a short step above the sustained rate passes on the
// bucket (TestBoostedLineNoLookAbove).
func (s *searcher) aboveLine(ctx context.Context, k Kind, top Step) (above, error) {
	c, t := s.choice(k), s.target(k)
	var a above
	for _, share := range aboveLine {
		if !wellUnder(t, top.AddedMedian, top.AddedP95) || c.Line.BoostKbit > 0 {
			break
		}
		if a.short = !s.afford(1); a.short {
			break
		}
		st, err := s.try(ctx, k, at(c, share))
		if err != nil {
			return a, err
		}
		if !st.Pass {
			a.hi = st.RateKbit
			break
		}
		a.passed++
		if !carried(c, st) {
			a.uncarried = &st
			continue
		}
		a.lo, a.goodput = st.RateKbit, st.GoodputKbit
	}
	return a, nil
}

// bracket goes on from a miss at 95 %: most knees sit between 85 and 95 %
// of the line, so it looks there first, and down to the floor only when
// 85 % misses too and its delay came down. A queue in the line's buffer
// shrinks as the rate leaves it; a delay that does not move with the rate
// is something else's (TestSettlesForWeaker, TestNoRate).
func (s *searcher) bracket(ctx context.Context, k Kind, at95 Step) (lo, hi int, err error) {
	c, t := s.choice(k), s.target(k)
	hi = c.Rule95
	st := at95
	for _, share := range []float64{Bracket, Floor} {
		if st, err = s.try(ctx, k, at(c, share)); err != nil {
			return 0, 0, err
		}
		if st.Pass {
			c.GoodputKbit = st.GoodputKbit
			return st.RateKbit, hi, nil
		}
		hi = st.RateKbit
		if share == Bracket && st.AddedMedian >= flatDelay*at95.AddedMedian {
			return 0, 0, fmt.Errorf("%s: %w (%s): lowering the rate from %.0f%% to %.0f%% of the line did not lower the delay (+%.1f, then +%.1f ms): it is not the line's buffer but a slow link's own packet time, Wi-Fi or a busy CPU",
				k, ErrNoRate, t.Name, 100*at95.Share, 100*st.Share, at95.AddedMedian, st.AddedMedian)
		}
	}
	return 0, 0, fmt.Errorf("%s: %w (%s) down to %.0f%% of the line (%d kbit/s: +%.1f/+%.1f ms): the delay left is not the line's buffer but a slow link's own packet time, Wi-Fi or a busy CPU",
		k, ErrNoRate, t.Name, 100*Floor, at(c, Floor), st.AddedMedian, st.AddedP95)
}

// bisect narrows direction k's rate between lo (a pass) and hi (a miss)
// to the resolution, or as far as the budget reaches, and sets it.
func (s *searcher) bisect(ctx context.Context, k Kind, lo, hi int) error {
	c, t := s.choice(k), s.target(k)
	step := s.resolution(c)
	for hi-lo > step && s.afford(1) {
		mid := (lo + hi) / 2
		st, err := s.try(ctx, k, mid)
		if err != nil {
			return err
		}
		if st.Pass && carried(c, st) {
			lo, c.GoodputKbit = mid, st.GoodputKbit
		} else {
			hi = mid
		}
	}
	c.RateKbit = lo
	c.because(RuleBisected, "the highest rate meeting %s: %d kbit/s does, %d kbit/s does not", t.Name, lo, hi)
	if hi-lo > step {
		c.also(RuleBudgetBound, " (the budget ended the bisection with %.1f%% of the line between them)", 100*float64(hi-lo)/float64(c.Line.RateKbit))
	}
	s.underLine(c, step)
	return s.set(ctx, k, c.RateKbit)
}

// carried: a step at or under the measured line, or one above it that
// carried more goodput than the line measured. Above the line a pass that
// carried no more is a short step whose queue has not grown yet
// (TestAboveLineUncarried).
func carried(c *Choice, st Step) bool {
	return st.RateKbit <= c.Line.RateKbit || st.GoodputKbit > c.Line.GoodputKbit
}

// underLine takes a knee found within lineError of the measured line, or
// above it, one step (the search's resolution) under it: there the
// highest passing rate is the link's capacity within the measurement's
// error, a queue at a load of one whose random walk a short phase does not
// show and a 30 s phase does (TestUnderLine).
func (s *searcher) underLine(c *Choice, step int) {
	if float64(c.RateKbit) < (1-lineError)*float64(c.Line.RateKbit) {
		return
	}
	c.RateKbit -= step
	c.also(RuleUnderLine, "; one step (%.0f%%) under that: at, above or up to %.0f%% under the measured line a short phase cannot tell the link's capacity from a queue that slowly grows", 100*s.c.Resolution, 100*lineError)
}

// lineError is how far the measured line may sit from the rate the link
// carries: a line read in one phase is off by up to 2 % (TestUnderLine).
const lineError = 0.02

// set sets direction k's shaper to rate, leaving the other's as it is.
func (s *searcher) set(ctx context.Context, k Kind, rate int) error {
	if k == Upload {
		return s.l.SetRates(ctx, 0, rate)
	}
	return s.l.SetRates(ctx, rate, 0)
}
