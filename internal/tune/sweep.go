package tune

import (
	"context"
	"errors"
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
	ProbeKbit        float64
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
	s := &search{l: l, c: Config{Target: c.Target, RatePerGoodput: c.RatePerGoodput, ProbeKbit: c.ProbeKbit, Progress: c.Progress}, r: &Report{Target: c.Target}}
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
	res.BestDown, res.BestUp = 0, 0
	// A+ is every phase, the bidirectional one too: each direction again,
	// from its one-way best down, loaded beside the other. The download
	// first, with the upload at its best: its ingress shaper sits behind
	// the modem, whose queue the upload's ACK bursts fill, so it is the
	// one that usually gives way; then the upload beside the download's
	// result. When the upload's queue is the one (the first phase's
	// one-way delays say so, or no download rate passes beside the
	// upload's best): the upload first, then the download.
	// (A rate above the one-way best misses the one-way phase anyway.)
	// A first phase at both one-way bests says whose queue it is, by
	// tune's rule (lowered): at its one-way best, often its line, the
	// upload plus the download's ACKs can be more than the link carries,
	// and then every download step misses on the upload's queue or passes
	// on luck (cable-boost × cake, 596eb29: the download swept from 39600
	// to 32800 beside the upload at its line, +5 to +152 ms).
	first, second := Download, Upload
	st, p, err := s.tryBidir(ctx, res.OneWayDown, res.OneWayUp)
	if err != nil {
		res.Steps = s.r.Steps
		return res, err
	}
	if cs := lowered(p, &s.r.Download, &s.r.Upload); !st.Pass && len(cs) == 1 && cs[0] == &s.r.Upload {
		first, second = Upload, Download
	}
	best, err := s.sweepBidir(ctx, c, first, res.OneWayDown, res.OneWayUp)
	if err == nil && best == 0 {
		first, second = second, first
		best, err = s.sweepBidir(ctx, c, first, res.OneWayDown, res.OneWayUp)
	}
	res.Steps = s.r.Steps
	if err != nil {
		return res, err
	}
	if best == 0 {
		return res, l.SetRates(ctx, res.LineDown, res.LineUp)
	}
	rates := map[Kind]int{Download: res.OneWayDown, Upload: res.OneWayUp, first: best}
	other, err := s.sweepBidir(ctx, c, second, rates[Download], rates[Upload])
	if err == nil && other == 0 {
		// The first best passed on the edge of the bar (cable × nss,
		// 18a4893: the download's +4.7 ms at 97 %, then +5.0-7.3 beside
		// every upload rate): beside the step below it, the other pass
		// that made it the best, the second direction's queue is its own.
		rates[first] -= int(math.Round(c.Step * float64(s.choice(first).Line.RateKbit)))
		other, err = s.sweepBidir(ctx, c, second, rates[Download], rates[Upload])
	}
	res.Steps = s.r.Steps
	if err != nil {
		return res, err
	}
	// The first direction was swept beside the second at its one-way
	// best, often its line, where the second's own queue decides the
	// phase; when the second's best came out lower, the first is swept
	// again beside it (cable × cake, 596eb29: the download's best 37600,
	// missing at 38000-38400 beside the upload at its line, +7.0/+13.4 ms;
	// beside the upload's best, 7920, +1.3/+3.3 at 37600, and tune's
	// 39240/7919 passed the full test).
	oneWay := map[Kind]int{Download: res.OneWayDown, Upload: res.OneWayUp}
	if other > 0 && other < oneWay[second] && best < oneWay[first] {
		rates = map[Kind]int{first: oneWay[first], second: other}
		again, err := s.sweepBidir(ctx, c, first, rates[Download], rates[Upload])
		res.Steps = s.r.Steps
		if err != nil {
			return res, err
		}
		best = max(best, again)
	}
	res.BestDown, res.BestUp = best, other
	if first == Upload {
		res.BestDown, res.BestUp = other, best
	}
	return res, l.SetRates(ctx, res.LineDown, res.LineUp)
}

// sweepBidir steps direction k of the bidirectional phase down from its
// rate in down/up to From of its line, the other held, until two steps in
// a row pass; the best of them (0: none).
func (s *search) sweepBidir(ctx context.Context, c SweepConfig, k Kind, down, up int) (int, error) {
	line, from := s.r.Download.Line.RateKbit, down
	if k == Upload {
		line, from = s.r.Upload.Line.RateKbit, up
	}
	var kn knee
	for rate := from; ; {
		st, _, err := s.tryBidir(ctx, down, up)
		if err != nil {
			return 0, err
		}
		st.RateKbit = rate // the swept direction's, for the knee (the step keeps down/up)
		next := rate - int(math.Round(c.Step*float64(line)))
		last := float64(next) < c.From*float64(line)-0.5
		if kn.add(st, last, 2) || last {
			return kn.best, nil
		}
		rate = next
		if k == Download {
			down = rate
		} else {
			up = rate
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
