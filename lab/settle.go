package main

import (
	"fmt"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

// Before each measurement the lab waits for the host to calm down: a load
// that comes and goes (a build, another job on a shared runner, a second
// lab) then costs a wait instead of discarded phases, and three discarded
// in a row make a scenario inconclusive. quietFor without a noisy() reason
// is calm; a host that does not calm within maxSettle is measured anyway
// and the gate judges what it measured. All of a run's waits share
// settleBudget, so a host busy from start to end costs minutes, not CI's
// timeout (TestSettle).
const (
	quietFor     = 3 * time.Second
	maxSettle    = 2 * time.Minute
	settleBudget = 10 * time.Minute
	settlePoll   = time.Second
	// the sampler's files trail the clock by a few periods
	sampleLag = 200 * time.Millisecond
)

// settler waits for quiet windows of the host's gauge.
type settler struct {
	gate   gate
	window func(from, to time.Time) (noise.Stats, error)
	now    func() time.Time
	sleep  func(time.Duration)
	left   time.Duration // what is left of settleBudget
}

func newSettler(r *noise.Reader) *settler {
	return &settler{gate: strict, window: r.Window, now: time.Now, sleep: time.Sleep, left: settleBudget}
}

// settle returns once the last quietFor was calm, or maxSettle (or the
// budget's rest) later. It says how long it waited and, when that was not
// for nothing, why: the reason of the last noisy window, and whether the
// host calmed.
func (s *settler) settle() (waited time.Duration, why string, calm bool, err error) {
	start := s.now()
	limit := min(maxSettle, s.left)
	defer func() { s.left -= waited }()
	for {
		t := s.now().Add(-sampleLag)
		st, err := s.window(t.Add(-quietFor), t)
		if err != nil {
			return waited, why, false, err
		}
		w := s.gate.noisy(&st)
		if w == "" {
			return waited, why, true, nil
		}
		why = w
		if waited >= limit {
			return waited, why, false, nil
		}
		s.sleep(settlePoll)
		waited = s.now().Sub(start)
	}
}

// settle waits for the host (settler.settle) before a measurement named
// what, and says so when it waited.
func (g *guest) settle(what string) error {
	if g.settler == nil {
		return nil
	}
	waited, why, calm, err := g.settler.settle()
	switch {
	case err != nil:
		return fmt.Errorf("noise gauge: %w", err)
	case why == "":
	case calm:
		g.say("%s: waited %.0f s for the host to calm (%s)", what, waited.Seconds(), shortWhy(why))
	default:
		g.say("%s: the host stayed busy for %.0f s (%s); measuring anyway, the gate judges it (%v of the run's waits left)", what, waited.Seconds(), shortWhy(why), g.settler.left.Round(time.Second))
	}
	return nil
}
