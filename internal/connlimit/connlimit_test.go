package connlimit

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":               "192.0.2.7/32",
		"::ffff:192.0.2.7":        "192.0.2.7/32",
		"2001:db8:1:2:aaaa::1":    "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::ffff": "2001:db8:1:2::/64",
	} {
		if got := Key(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("Key(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := &Limiter{Total: 3, PerKey: 2}
	a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2") // one /64
	c := netip.MustParseAddr("192.0.2.1")
	ra, _, err := l.Take(a, "slots", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Take(b, "slots", nil); err != nil {
		t.Fatal(err)
	}
	var full *Full
	if _, _, err := l.Take(a, "slots", nil); !errors.As(err, &full) || !full.PerKey || !strings.Contains(err.Error(), "2001:db8::/64 holds 2 slots") {
		t.Errorf("third from one /64: %v", err)
	}
	if _, _, err := l.Take(c, "slots", nil); err != nil {
		t.Errorf("another client: %v", err)
	}
	ra()
	ra() // twice is harmless
	if l.Held() != 2 {
		t.Errorf("held %d after one release", l.Held())
	}
}

// At the total, a newcomer displaces the oldest slot of the heaviest
// client, never one of a client holding as few as itself.
func TestLimiterEvicts(t *testing.T) {
	l := &Limiter{Total: 4, PerKey: 4}
	heavy := netip.MustParseAddr("192.0.2.1")
	var evicted []int
	var releases []func()
	for i := range 3 {
		r, _, err := l.Take(heavy, "slots", func() { evicted = append(evicted, i) })
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	if _, _, err := l.Take(netip.MustParseAddr("192.0.2.2"), "slots", nil); err != nil {
		t.Fatal(err)
	}
	_, from, err := l.Take(netip.MustParseAddr("192.0.2.3"), "slots", nil)
	if err != nil || from.String() != "192.0.2.1/32" || len(evicted) != 1 || evicted[0] != 0 {
		t.Fatalf("newcomer at the total: %v, evicted %v from %s", err, evicted, from)
	}
	releases[0]() // the evicted holder still releases: a no-op now
	if l.Held() != 4 {
		t.Errorf("held %d, want 4", l.Held())
	}
	// two of heavy, one each of three others: a fourth client with none
	// displaces heavy again; then all hold one or two and it is full
	if _, _, err := l.Take(netip.MustParseAddr("192.0.2.4"), "slots", nil); err != nil || len(evicted) != 2 {
		t.Fatalf("second newcomer: %v, evicted %v", err, evicted)
	}
	var full *Full
	if _, _, err := l.Take(netip.MustParseAddr("192.0.2.5"), "slots", nil); !errors.As(err, &full) || full.PerKey {
		t.Errorf("every client at one slot: %v, want the total", err)
	}
}

func TestWindow(t *testing.T) {
	w := &Window{Span: time.Minute}
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if n := w.Add(a, t0.Add(time.Duration(i)*time.Second)); n != i+1 {
			t.Errorf("add %d: count %d", i, n)
		}
	}
	if n := w.Count(a, t0.Add(61*time.Second)); n != 1 {
		t.Errorf("after the window moved: %d, want 1", n)
	}
	w.Add(netip.MustParseAddr("192.0.2.2"), t0.Add(5*time.Minute))
	if len(w.m) != 1 {
		t.Errorf("stale clients kept: %d keys", len(w.m))
	}
}

func TestThrottle(t *testing.T) {
	th := &Throttle{Every: 50 * time.Millisecond}
	if th.Line("a") != "a" || th.Line("b") != "" || th.Line("c") != "" {
		t.Error("second and third line within the period got through")
	}
	time.Sleep(60 * time.Millisecond)
	if got := th.Line("d"); got != "d (and 2 more like it)" {
		t.Errorf("after the period: %q", got)
	}
}

// TestReclaimIdle: a client at its cap with an idle slot gets a new slot
// by displacing its own oldest idle one (closing it); with none idle, or
// without Reclaim, it is refused.
func TestReclaimIdle(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.7")
	for _, reclaim := range []bool{false, true} {
		l := &Limiter{Total: 10, PerKey: 2, Reclaim: reclaim}
		closed := 0
		s1, _, err1 := l.TakeSlot(a, "connections", func() { closed++ })
		_, _, err2 := l.TakeSlot(a, "connections", func() { closed++ })
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if _, _, err := l.TakeSlot(a, "connections", nil); err == nil {
			t.Errorf("reclaim %v: a third slot with none idle", reclaim)
		}
		s1.Idle(true)
		_, _, err := l.TakeSlot(a, "connections", nil)
		if reclaim && (err != nil || closed != 1 || l.Held() != 2) {
			t.Errorf("reclaim: err %v, %d closed, %d held; want the idle one displaced", err, closed, l.Held())
		}
		if !reclaim && err == nil {
			t.Error("without Reclaim an idle slot was displaced")
		}
		s1.Release() // after an eviction: a no-op
		if reclaim && l.Held() != 2 {
			t.Errorf("a release after the eviction freed another slot: %d held", l.Held())
		}
	}
}
