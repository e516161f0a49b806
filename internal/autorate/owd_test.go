package autorate

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/bbserver/bbservertest"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// One-way delays from a sqmkit serve on loopback: both directions, near
// zero (one clock), without a gap when one session ends and the next
// begins. The counts and the gap are judged against the ticks the test
// really ran, and the delays by their median: a loaded host delivers
// fewer ticks and a stalled one now and then (issue #73).
func TestServerSource(t *testing.T) {
	addr, stop := bbservertest.Serve(t, "127.0.0.1", bbserver.Config{MaxTests: 100, PerIP: 100})
	defer stop()
	s := &Server{Addr: addr, Session: 1500 * time.Millisecond, Log: func(m string) { t.Log(m) }}
	var n [2]int
	var last time.Time
	var delays []float64
	gap := time.Duration(0)
	run := ticked(t, s, 3500*time.Millisecond)
	if run.ticks < 160 { // 175 on an idle host
		tctest.Absorbed(t, "%d ticks of 20 ms in 3.5 s", run.ticks)
	}
	for _, r := range run.raws {
		n[r.Dir]++
		delays = append(delays, math.Abs(r.Ms))
		if !last.IsZero() && r.At.Sub(last) > gap {
			gap = r.At.Sub(last)
		}
		last = r.At
	}
	if m := median(delays); !(m < 5) {
		t.Errorf("one-way delays on loopback: median %.1f ms", m)
	}
	// a session lasts 1.5 s: at most one tick in three ends one
	if least := 2 * run.ticks / 3; n[config.Upload] < least || n[config.Download] < least {
		t.Errorf("samples: %d up, %d down in %d ticks", n[config.Upload], n[config.Download], run.ticks)
	}
	// the next session opens before the current one ends: one probe
	// interval and a handshake beyond the ticks' own largest gap at most
	if gap > run.gap+300*time.Millisecond {
		t.Errorf("a %v gap in the samples (sessions of 1.5 s, ticks %v apart at most)", gap, run.gap)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

// tickRun is what ticked saw: every sample, how many ticks ran and the
// largest gap between two of them.
type tickRun struct {
	raws  []Raw
	ticks int
	gap   time.Duration
}

// ticked runs src for dur, probing every 20 ms as the daemon's tick
// would, and returns every sample. Run runs on the caller's goroutine, so
// a socket it opens is in the caller's network namespace (tctest.Netns).
func ticked(t *testing.T, src Source, dur time.Duration) tickRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	done := make(chan tickRun)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var run tickRun
		var last time.Time
		for {
			select {
			case now := <-tick.C:
				run.raws = src.Probe(now, run.raws)
				if run.ticks++; !last.IsZero() {
					run.gap = max(run.gap, now.Sub(last))
				}
				last = now
			case <-ctx.Done():
				done <- run
				return
			}
		}
	}()
	if err := src.Run(ctx); err != context.DeadlineExceeded {
		t.Errorf("%s ended with %v", src.Name(), err)
	}
	return <-done
}
