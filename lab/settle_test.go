package main

import (
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

// settle waits for a calm window, gives up after maxSettle, and all its
// waits together stay inside the run's budget.
func TestSettle(t *testing.T) {
	busy := noise.Stats{Foreign: 0.3, Busy: 0.1}
	calm := noise.Stats{Foreign: 0.01, Busy: 0.1}
	unseen := noise.Stats{Foreign: 0.01, Busy: 0.1, Missing: 0.5}
	for _, tc := range []struct {
		name    string
		windows []noise.Stats // one per poll; the last repeats
		left    time.Duration
		waited  time.Duration
		calm    bool
		leftAft time.Duration
	}{
		{"calm at once", []noise.Stats{calm}, settleBudget, 0, true, settleBudget},
		{"calms after three polls", []noise.Stats{busy, busy, unseen, calm}, settleBudget, 3 * settlePoll, true, settleBudget - 3*settlePoll},
		{"never calms", []noise.Stats{busy}, settleBudget, maxSettle, false, settleBudget - maxSettle},
		{"the budget's rest", []noise.Stats{busy}, 5 * time.Second, 5 * time.Second, false, 0},
		{"the budget spent", []noise.Stats{busy}, 0, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(1e9, 0)
			polls := 0
			s := &settler{
				gate: strict,
				window: func(from, to time.Time) (noise.Stats, error) {
					if to.Sub(from) != quietFor || !to.Before(clock) {
						t.Errorf("window %v..%v at %v: want the last %v before the sampler's lag", from, to, clock, quietFor)
					}
					w := tc.windows[min(polls, len(tc.windows)-1)]
					polls++
					return w, nil
				},
				now:   func() time.Time { return clock },
				sleep: func(d time.Duration) { clock = clock.Add(d) },
				left:  tc.left,
			}
			waited, why, ok, err := s.settle()
			if err != nil || waited != tc.waited || ok != tc.calm || s.left != tc.leftAft {
				t.Fatalf("waited %v calm %v left %v err %v; want %v %v %v", waited, ok, s.left, err, tc.waited, tc.calm, tc.leftAft)
			}
			if (why == "") != (tc.waited == 0 && tc.calm) {
				t.Errorf("why %q after waiting %v", why, waited)
			}
		})
	}
}
