package bbtest

import (
	"slices"
	"testing"
	"time"
)

// TestRecentByArrival: the live RTT shows replies that arrived in the last
// window, however long ago their probe left; a probe sent in the window but
// not back yet, or a reply that came earlier, does not count. Selecting by
// send time instead showed the last loaded RTTs well into the idle phase.
func TestRecentByArrival(t *testing.T) {
	s := int64(time.Second)
	tr := &tester{start: time.Now().Add(-10 * time.Second)}
	p := newProber(tr, nil, 8)
	p.recs = []record{
		{seq: 0, sent: 5 * s, recv: 5*s + s/10},   // came back long ago
		{seq: 1, sent: 7 * s, recv: 9*s + 9*s/10}, // slow: 2.9 s, just arrived
		{seq: 2, sent: 9*s + 8*s/10, recv: 9*s + 8*s/10 + s/1000},
		{seq: 3, sent: 9*s + 9*s/10}, // in flight
	}
	p.slowest = 29 * s / 10
	got := p.recent(time.Second / 2)
	slices.Sort(got)
	want := []float64{1, 2900}
	if !slices.Equal(got, want) {
		t.Errorf("recent RTTs %v, want %v", got, want)
	}
}
