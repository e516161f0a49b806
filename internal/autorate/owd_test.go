package autorate

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/bbserver/bbservertest"
)

// One-way delays from a sqmkit serve on loopback: both directions, near
// zero (one clock), without a gap when one session ends and the next
// begins.
func TestServerSource(t *testing.T) {
	addr, stop := bbservertest.Serve(t, "127.0.0.1", bbserver.Config{MaxTests: 100, PerIP: 100})
	s := &Server{Addr: addr, Session: 1500 * time.Millisecond, Log: func(m string) { t.Log(m) }}
	var iv atomic.Int64
	iv.Store(int64(20 * time.Millisecond))
	out := make(chan Raw, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	go s.Run(ctx, &iv, out)
	var n [2]int
	var last time.Time
	gap := time.Duration(0)
	for r := range collect(ctx, out) {
		n[r.Dir]++
		if math.Abs(r.Ms) > 50 {
			t.Errorf("%s one-way delay %.1f ms on loopback", r.Path, r.Ms)
		}
		if !last.IsZero() && r.At.Sub(last) > gap {
			gap = r.At.Sub(last)
		}
		last = r.At
	}
	if n[Up] < 80 || n[Down] < 80 {
		t.Errorf("samples: %d up, %d down in 3.5 s at 20 ms", n[Up], n[Down])
	}
	// the next session opens before the current one ends: one probe
	// interval and a handshake at most
	if gap > 300*time.Millisecond {
		t.Errorf("a %v gap in the samples (sessions of 1.5 s)", gap)
	}
	stop()
}

func collect(ctx context.Context, out chan Raw) chan Raw {
	c := make(chan Raw)
	go func() {
		defer close(c)
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-out:
				c <- r
			}
		}
	}()
	return c
}
