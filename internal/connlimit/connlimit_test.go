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
	ra, err := l.Take(a, "slots")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(b, "slots"); err != nil {
		t.Fatal(err)
	}
	var full *Full
	if _, err := l.Take(a, "slots"); !errors.As(err, &full) || !full.PerKey || !strings.Contains(err.Error(), "2001:db8::/64 holds 2 slots") {
		t.Errorf("third from one /64: %v", err)
	}
	if _, err := l.Take(c, "slots"); err != nil {
		t.Errorf("another client: %v", err)
	}
	if _, err := l.Take(netip.MustParseAddr("192.0.2.2"), "slots"); !errors.As(err, &full) || full.PerKey {
		t.Errorf("beyond the total: %v", err)
	}
	ra()
	ra() // twice is harmless
	if l.Held() != 2 {
		t.Errorf("held %d after one release", l.Held())
	}
	if _, err := l.Take(a, "slots"); err != nil {
		t.Errorf("after a release: %v", err)
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
