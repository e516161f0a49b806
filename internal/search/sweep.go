package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// SweepConfig is an exhaustive measurement of one link: every direction
// at every share of its line rate from To down to From, in steps of Step.
// It is the ground truth a search is judged against (`sqmkit tune
// --sweep`, `sqmkit-lab sweep`), and the whole rate–latency curve for a
// user who wants to see it.
type SweepConfig struct {
	Target Target
	// LineDown, LineUp are the shaper rates that are 100 %; 0 measures
	// the line first, as a search does (OpenDown/OpenUp, RatePerGoodput).
	LineDown, LineUp int
	OpenDown, OpenUp int
	RatePerGoodput   float64
	ProbeKbit        float64
	From, To, Step   float64 // shares of the line, e.g. 0.80, 1.00, 0.01
	// StopAfter ends a direction after that many passing steps in a row
	// (0: measure every step). Below a rate that keeps the target a lower
	// one only drains the bottleneck's queue further, so the rest of the
	// range repeats the answer; more than one guards against a lucky step.
	StopAfter int
	// Phase is the length of every step's loaded phase, which
	// Session.Sweep gives its Live (0: a search step's): a longer one
	// judges a rate the way a full test grades it (30 s phases in the
	// lab), where a 6 s one reads a few milliseconds either way.
	Phase    time.Duration
	Progress func(string)
}

// SweepResult is every step measured and, per direction, the best rate:
// one way, the highest one that meets the target with the next lower step
// meeting it too (one passing step among misses is noise, not a rate to
// keep); with both directions loaded, the highest pair that meets it in
// each of HoldPhases phases (descend). One-way knees are sharp; the coin
// is the pair's, where each direction waits on the other's ACKs.
type SweepResult struct {
	Target           Target
	LineDown, LineUp int
	Phase            time.Duration // each step's loaded phase (set by Session.Sweep or the caller)
	Steps            []Step
	BestDown, BestUp int // 0: no rate in the range met the target
	// TargetDown, TargetUp are the grade each best rate meets: the
	// target, or the weaker one a direction settled for (tune.weaker).
	TargetDown, TargetUp string
	// OneWayDown, OneWayUp are the best rates of the one-way phases
	// alone; BestDown/BestUp hold the bidirectional phase too.
	OneWayDown, OneWayUp int
}

// Sweep runs a sweep. The other direction is held at its line rate while
// one is measured (shaped, so its ACKs do not queue in the modem, never
// limiting). On error the Link is left wherever the sweep was.
func Sweep(ctx context.Context, l Link, c SweepConfig) (*SweepResult, error) {
	if c.Step <= 0 || c.From <= 0 || c.To < c.From {
		return nil, fmt.Errorf("sweep range %.2f..%.2f step %.2f: want 0 < from <= to and a positive step", c.From, c.To, c.Step)
	}
	s := &searcher{l: l, c: Config{Target: c.Target, RatePerGoodput: c.RatePerGoodput, ProbeKbit: c.ProbeKbit, Progress: c.Progress}, r: &Result{Target: c.Target}}
	s.r.Download.Line.RateKbit, s.r.Upload.Line.RateKbit = c.LineDown, c.LineUp
	if c.LineDown == 0 || c.LineUp == 0 {
		if err := l.SetRates(ctx, c.OpenDown, c.OpenUp); err != nil {
			return nil, err
		}
		for _, k := range []Kind{Download, Upload} {
			if s.choice(k).Line.RateKbit != 0 {
				continue
			}
			line, err := s.line(ctx, k)
			if err != nil {
				return nil, err
			}
			s.choice(k).Line = line
		}
	}
	res := &SweepResult{Target: c.Target, LineDown: s.r.Download.Line.RateKbit, LineUp: s.r.Upload.Line.RateKbit}
	if err := l.SetRates(ctx, res.LineDown, res.LineUp); err != nil {
		return res, err
	}
	n := int(math.Round((c.To - c.From) / c.Step))
	for _, k := range []Kind{Download, Upload} {
		line := s.choice(k).Line.RateKbit
		var kn knee
		// A direction with no rate that meets the target is swept again
		// for the weaker one, as a search settles for it.
		err := s.settle(ctx, k, func(ctx context.Context, k Kind) error {
			kn = knee{}
			for i := 0; i <= n; i++ {
				st, err := s.try(ctx, k, int(math.Round((c.To-float64(i)*c.Step)*float64(line))))
				if err != nil {
					return err
				}
				if kn.add(st, i == n, c.StopAfter) {
					break
				}
			}
			if kn.best == 0 {
				return fmt.Errorf("%s: %w (%s) from %.0f%% down to %.0f%% of the line", k, ErrNoRate, s.target(k).Name, 100*c.To, 100*c.From)
			}
			return nil
		})
		res.Steps = s.r.Steps
		if err != nil && !errors.Is(err, ErrNoRate) {
			return res, err
		}
		if k == Download {
			res.BestDown, res.TargetDown = kn.best, s.target(k).Name
		} else {
			res.BestUp, res.TargetUp = kn.best, s.target(k).Name
		}
		// back to the line rate before the other direction
		if err := l.SetRates(ctx, res.LineDown, res.LineUp); err != nil {
			return res, err
		}
	}
	res.OneWayDown, res.OneWayUp = res.BestDown, res.BestUp
	if res.BestDown == 0 || res.BestUp == 0 {
		return res, nil
	}
	var err error
	res.BestDown, res.BestUp, err = s.descend(ctx, c, res.OneWayDown, res.OneWayUp)
	res.Steps = s.r.Steps
	if err != nil {
		return res, err
	}
	return res, l.SetRates(ctx, res.LineDown, res.LineUp)
}

// HoldPhases is how many bidirectional phases at one pair must each meet
// the target before the pair is the sweep's best: a best is a rate that
// holds the grade, not one that met it once. Three of three is the first
// count a pair passing half its phases meets less often than once in
// seven; the same pair is measured again, not the step below, which also
// lowers the download and leaves the upload room (TestSweepSettles).
const HoldPhases = 3

// descend finds the best pair of the bidirectional phase: from both
// one-way bests it lowers, one step at a time, the direction whose queue a
// miss was (Queued), until a pair whose HoldPhases phases each meet the
// target; a pass that a later phase misses is lowered by that miss. It is
// the exhaustive form of tune's descent, so the two walk one path through
// the two-dimensional frontier (TestSweep).
// It departs from tune's descent in two rules: it never puts back a
// lowering that left the delay flat (its 1 % steps move the delay less
// than a phase's noise), and it marks no slow line, so both cross one
// frontier and may end at different pairs of it.
// A direction is never lowered below From of its line; when none can be,
// there is no best (0, 0).
func (s *searcher) descend(ctx context.Context, c SweepConfig, down, up int) (int, int, error) {
	d, u := &s.r.Download, &s.r.Upload
	floor := func(ch *Choice) int { return int(math.Round(c.From * float64(ch.Line.RateKbit))) }
	stepOf := func(ch *Choice) int { return int(math.Round(c.Step * float64(ch.Line.RateKbit))) }
	for {
		var p Phase
		held := true
		for i := 0; held && i < HoldPhases; i++ {
			var st Step
			var err error
			if st, p, err = s.tryBidir(ctx, down, up); err != nil {
				return 0, 0, err
			}
			held = st.Pass
		}
		if held {
			return down, up, nil
		}
		moved := false
		for _, ch := range lowered(p, s.target(Bidir).MedianMs, d, u) {
			rate := &down
			if ch == u {
				rate = &up
			}
			if next := *rate - stepOf(ch); next >= floor(ch) {
				*rate, moved = next, true
			}
		}
		if !moved {
			return 0, 0, nil
		}
	}
}

// knee finds a sweep's best rate in its steps, highest first: the highest
// of the first two passes in a row (one pass among misses is noise, not a
// rate to keep); the range's lowest step counts alone.
type knee struct {
	best int
	prev Step
	run  int
}

// add takes the next lower step; done after stop passes in a row (0:
// never).
func (kn *knee) add(st Step, lowest bool, stop int) (done bool) {
	if st.Pass {
		kn.run++
	} else {
		kn.run = 0
	}
	if kn.best == 0 && st.Pass {
		switch {
		case kn.prev.Pass:
			kn.best = kn.prev.RateKbit
		case lowest:
			kn.best = st.RateKbit
		}
	}
	kn.prev = st
	return stop > 0 && kn.run >= stop
}
