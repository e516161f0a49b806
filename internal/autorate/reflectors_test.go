package autorate

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// Round trips to ICMP reflectors, in a namespace of the test's own (its
// loopback answers; 10.9.9.9 has no route there): the dead reflector is
// replaced by the spare, whose replies come back as samples of both
// directions.
func TestReflectors(t *testing.T) {
	ns := tctest.NewNetns(t, "refl")
	if out, err := exec.Command("ip", "-n", ns.Name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ns.Do(t, func() {
		var mu sync.Mutex
		var logs []string
		r := &Reflectors{Addrs: []netip.Addr{netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("127.0.0.1")}, Active: 1, DeadAfter: 3,
			Log: func(s string) { mu.Lock(); logs = append(logs, s); mu.Unlock() }}
		run := ticked(t, r, time.Second)
		var rtts []float64
		for _, raw := range run.raws {
			if raw.Path != "127.0.0.1" || !raw.Both || raw.Ms < 0 {
				t.Errorf("sample %+v", raw)
			}
			rtts = append(rtts, raw.Ms)
		}
		// the dead reflector's 3 probes, then a sample a tick, half of them
		// at least; the round trips by their median (a loaded host stalls
		// one now and then)
		if len(rtts) < run.ticks/2 || !(median(rtts) < 5) {
			t.Errorf("%d samples in %d ticks, median %.1f ms", len(rtts), run.ticks, median(rtts))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(logs) == 0 || !strings.Contains(logs[0], "10.9.9.9 answered none of its last 3 probes: replaced by 127.0.0.1") {
			t.Errorf("logs %q", logs)
		}
	})
}

func TestReflectorsMixedFamilies(t *testing.T) {
	r := &Reflectors{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}}
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "one family") {
		t.Errorf("got %v", err)
	}
}

// TestReflectorOutageLogsRarely: with every reflector silent (the WAN
// down), the active ones rotate through the spares for the whole outage;
// the log gets the first replacement and then at most one line a minute,
// which counts the rest.
func TestReflectorOutageLogsRarely(t *testing.T) {
	ns := tctest.NewNetns(t, "reflout")
	ns.Do(t, func() {
		var mu sync.Mutex
		var logs []string
		addrs := []netip.Addr{netip.MustParseAddr("10.9.9.1"), netip.MustParseAddr("10.9.9.2"), netip.MustParseAddr("10.9.9.3")}
		r := &Reflectors{Addrs: addrs, Active: 1, DeadAfter: 2, Log: func(s string) { mu.Lock(); logs = append(logs, s); mu.Unlock() }}
		ticked(t, r, 2*time.Second) // 100 probes, a replacement every 2
		mu.Lock()
		defer mu.Unlock()
		if len(logs) != 1 || !strings.Contains(logs[0], "replaced by") {
			t.Errorf("%d log lines in 2 s of outage, want 1: %q", len(logs), logs)
		}
	})
}
