// Package search finds, per direction, the highest shaper rate whose
// loaded phase still meets a latency target: the session every SQM guide
// leaves to its reader ("set 90–95 %, test, read the plot, lower it, try
// again"), done by the tool that owns the shaper and the test
// (docs/design.md, "Tuning"). It is pure: it drives a Link, which package
// tune backs with `sqmkit rate` and `sqmkit test` phases and the tests
// with a simulated link, and it imports nothing that touches a kernel.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Search finds the rates. On error the Link is left wherever the search
// was: the caller restores the rates it started with.
func Search(ctx context.Context, l Link, c Config) (*Result, error) {
	if c.Resolution <= 0 {
		c.Resolution = 0.01
	}
	r := &Result{Target: c.Target}
	s := &searcher{l: l, c: c, r: r}
	if err := l.SetRates(ctx, c.OpenDown, c.OpenUp); err != nil {
		return r, err
	}
	for _, k := range []Kind{Download, Upload} {
		line, err := s.line(ctx, k)
		if err != nil {
			return r, err
		}
		s.choice(k).Line = line
	}
	s.markSlow()
	// a line that moved while it was measured is not searched
	if err := s.checkMoving(); err != nil {
		return r, err
	}
	r.Download.AckKbit = int(math.Round(c.AckUncounted * float64(r.Upload.Line.GoodputKbit)))
	r.Upload.AckKbit = int(math.Round(c.AckUncounted * float64(r.Download.Line.GoodputKbit)))
	// Search one direction with the other at its line rate: shaped, so
	// its ACKs and probes do not queue in the modem, never limiting.
	if err := l.SetRates(ctx, 0, r.Upload.Line.RateKbit); err != nil {
		return r, err
	}
	// What a bounded search keeps for later while it searches: each
	// direction needs two steps (95 % and the line, or 95 % and 85 %) and the
	// bidirectional check bidirReserve; the refining steps left over are
	// shared, the larger half the download's at most, whose percent is the
	// more goodput (TestDownloadBudgetShare). The bidirectional check gets the
	// most: a search that cannot finish it writes nothing.
	pool := max(0, c.MaxSteps-MinSteps)
	for _, d := range []struct {
		k       Kind
		reserve int
	}{{Download, 2 + bidirReserve + pool/2}, {Upload, bidirReserve}} {
		s.reserve = d.reserve
		if err := s.settle(ctx, d.k, s.direction); err != nil {
			return r, err
		}
	}
	s.reserve = 0
	if err := s.bidir(ctx); err != nil {
		return r, err
	}
	if err := s.checkMoving(); err != nil {
		return r, err
	}
	// The bidirectional check may end at rates no phase ran at; the
	// confirming test measures the shaper as it is, so it has to be at the
	// rates reported (TestSearchEndsAtItsRates).
	return r, l.SetRates(ctx, r.Download.RateKbit, r.Upload.RateKbit)
}

type searcher struct {
	l Link
	c Config
	r *Result
	// used counts the loaded phases after the line measurements; reserve
	// is how many of c.MaxSteps the steps still to come need.
	used, reserve int
}

// afford says whether n more refining steps fit in c.MaxSteps beside the
// reserve.
func (s *searcher) afford(n int) bool {
	return s.c.MaxSteps == 0 || s.used+n+s.reserve <= s.c.MaxSteps
}

// load runs one search step's phase.
func (s *searcher) load(ctx context.Context, k Kind) (Phase, error) {
	s.used += s.cost(k)
	return s.l.Load(ctx, k, s.r.Length(k))
}

// Length is how long a step, or the confirming test's phase, of kind k
// runs.
func (r *Result) Length(k Kind) Length {
	if k == Bidir && r.longBidir() {
		return LongPhase
	}
	return StepPhase
}

// cost is what a step of kind k takes of c.MaxSteps.
func (s *searcher) cost(k Kind) int {
	if s.r.Length(k) == LongPhase {
		return LongSteps
	}
	return 1
}

func (s *searcher) choice(k Kind) *Choice { return s.r.choice(k) }

// settle runs find for direction k against the target asked for and,
// when no rate meets it, once more against the weaker one; on a line
// whose own packet time puts the target out of reach (packetMs), the
// weaker one at once.
func (s *searcher) settle(ctx context.Context, k Kind, find func(context.Context, Kind) error) error {
	c := s.choice(k)
	c.Target = s.c.Target
	w, ok := weaker[s.c.Target.Name]
	var err error
	if half := s.packetMs(c.Line) / 2; ok && half > s.c.Target.MedianMs {
		err = fmt.Errorf("%s: %w (%s): one full-size packet takes %.1f ms at the line rate, and a probe waits half of that, %.1f ms, behind the one in flight, over the median bar of +%.0f ms at any shaper rate",
			k, ErrNoRate, s.c.Target.Name, 2*half, half, s.c.Target.MedianMs)
	} else if err = find(ctx, k); !ok || !errors.Is(err, ErrNoRate) {
		return err
	}
	c.OutOfReach = err.Error()
	c.Target = w
	s.say("%v; settling for %s, the best grade this link allows", err, w.Name) // err names k
	if err = find(ctx, k); err == nil {
		c.Why = fmt.Sprintf("%s is out of reach on this link; %s", s.c.Target.Name, c.Why)
		c.Rules = append([]Rule{RuleOutOfReach}, c.Rules...)
	}
	return err
}

func (s *searcher) target(k Kind) Target { return s.r.TargetOf(k) }

// TargetOf is what a phase of kind k must meet: its direction's target,
// and for the bidirectional phase the weaker of the two (both directions'
// queues are in it).
func (r *Result) TargetOf(k Kind) Target {
	if k != Bidir {
		if t := r.choice(k).Target; t.Name != "" {
			return t
		}
		return r.Target
	}
	t := r.Target
	if r.BidirTarget.Name != "" {
		return r.BidirTarget
	}
	for _, c := range []Choice{r.Download, r.Upload} {
		if c.Target.Name != "" && c.Target.MedianMs > t.MedianMs {
			t = c.Target
		}
	}
	return t
}

// choice is direction k's choice (the download's for Bidir).
func (r *Result) choice(k Kind) *Choice {
	if k == Upload {
		return &r.Upload
	}
	return &r.Download
}

func (s *searcher) say(format string, a ...any) {
	if s.c.Progress != nil {
		s.c.Progress(fmt.Sprintf(format, a...))
	}
}
