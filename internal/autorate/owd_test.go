package autorate

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/bbserver/bbservertest"
	"github.com/sqmkit/sqmkit/internal/config"
)

// One-way delays from a sqmkit serve on loopback: both directions, near
// zero (one clock), without a gap when one session ends and the next
// begins.
func TestServerSource(t *testing.T) {
	addr, stop := bbservertest.Serve(t, "127.0.0.1", bbserver.Config{MaxTests: 100, PerIP: 100})
	defer stop()
	s := &Server{Addr: addr, Session: 1500 * time.Millisecond, Log: func(m string) { t.Log(m) }}
	var n [2]int
	var last time.Time
	gap := time.Duration(0)
	for _, r := range ticked(t, s, 3500*time.Millisecond) {
		n[r.Dir]++
		if math.Abs(r.Ms) > 50 {
			t.Errorf("%s one-way delay %.1f ms on loopback", r.Path, r.Ms)
		}
		if !last.IsZero() && r.At.Sub(last) > gap {
			gap = r.At.Sub(last)
		}
		last = r.At
	}
	if n[config.Upload] < 80 || n[config.Download] < 80 {
		t.Errorf("samples: %d up, %d down in 3.5 s at 20 ms", n[config.Upload], n[config.Download])
	}
	// the next session opens before the current one ends: one probe
	// interval and a handshake at most
	if gap > 300*time.Millisecond {
		t.Errorf("a %v gap in the samples (sessions of 1.5 s)", gap)
	}
}

// ticked runs src for dur, probing every 20 ms as the daemon's tick
// would, and returns every sample. Run runs on the caller's goroutine, so
// a socket it opens is in the caller's network namespace (tctest.Netns).
func ticked(t *testing.T, src Source, dur time.Duration) []Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	samples := make(chan []Raw)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var out []Raw
		for {
			select {
			case now := <-tick.C:
				out = src.Probe(now, out)
			case <-ctx.Done():
				samples <- out
				return
			}
		}
	}()
	if err := src.Run(ctx); err != context.DeadlineExceeded {
		t.Errorf("%s ended with %v", src.Name(), err)
	}
	return <-samples
}
