package tune

import (
	"context"
	"fmt"
	"math"
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
	From, To, Step   float64 // shares of the line, e.g. 0.80, 1.00, 0.01
	// StopAfter ends a direction after that many passing steps in a row
	// (0: measure every step). Below a rate that keeps the target a lower
	// one only drains the bottleneck's queue further, so the rest of the
	// range repeats the answer; more than one guards against a lucky step.
	StopAfter int
	Progress  func(string)
}

// SweepResult is every step measured and, per direction, the best rate:
// the highest one that meets the target with the next lower step meeting
// it too (one passing step among misses is noise, not a rate to keep).
type SweepResult struct {
	Target           Target
	LineDown, LineUp int
	Steps            []Step
	BestDown, BestUp int // 0: no rate in the range met the target
}

// Sweep runs a sweep. The other direction is held at its line rate while
// one is measured (shaped, so its ACKs do not queue in the modem, never
// limiting). On error the Link is left wherever the sweep was.
func Sweep(ctx context.Context, l Link, c SweepConfig) (*SweepResult, error) {
	if c.Step <= 0 || c.From <= 0 || c.To < c.From {
		return nil, fmt.Errorf("sweep range %.2f..%.2f step %.2f: want 0 < from <= to and a positive step", c.From, c.To, c.Step)
	}
	s := &search{l: l, c: Config{Target: c.Target, RatePerGoodput: c.RatePerGoodput, Progress: c.Progress}, r: &Report{Target: c.Target}}
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
		best, run := 0, 0
		prev := Step{}
		for i := 0; i <= n; i++ {
			st, err := s.try(ctx, k, int(math.Round((c.To-float64(i)*c.Step)*float64(line))))
			res.Steps = s.r.Steps
			if err != nil {
				return res, err
			}
			if st.Pass {
				run++
			} else {
				run = 0
			}
			// the highest of the first two passes in a row; the range's
			// lowest step counts alone
			if best == 0 && st.Pass && (prev.Pass || i == n) {
				best = prev.RateKbit
				if i == n && !prev.Pass {
					best = st.RateKbit
				}
			}
			prev = st
			if c.StopAfter > 0 && run >= c.StopAfter {
				break
			}
		}
		if k == Download {
			res.BestDown = best
		} else {
			res.BestUp = best
		}
		// back to the line rate before the other direction
		if err := l.SetRates(ctx, res.LineDown, res.LineUp); err != nil {
			return res, err
		}
	}
	return res, nil
}
