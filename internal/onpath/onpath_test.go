package onpath

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
)

// TestRoute asks the kernel itself: loopback's addresses leave by lo.
func TestRoute(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1"} {
		dev, err := Route(netip.MustParseAddr(a))
		if err != nil || dev != "lo" {
			t.Errorf("Route(%s) = %q, %v; want lo", a, dev, err)
		}
	}
}

// TestChoose: a server routed through a queue's device (or one stacked on
// it) is tested there, on the family that is; one routed elsewhere is
// refused with where it leaves, the queues and the fix.
func TestChoose(t *testing.T) {
	qs := []config.Queue{{Section: "wan", Interface: "wan"}, {Section: "lte", Interface: "wwan0"}}
	table := map[string]string{"192.0.2.1": "pppoe-wan", "2001:db8::1": "6in4-henet", "198.51.100.1": "wwan0", "203.0.113.1": "eth3"}
	route := func(a netip.Addr) (string, error) {
		if d, ok := table[a.String()]; ok {
			return d, nil
		}
		return "", errors.New("no route")
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, c := range []struct {
		name, want, network string
		addrs               []netip.Addr
		gotNet, gotQueue    string
		err                 string
	}{
		{"pppoe-wan over wan.7 over wan", "", "tcp", addrs("192.0.2.1"), "tcp4", "wan", ""},
		{"v6 leaves by a tunnel: v4 only", "", "tcp", addrs("2001:db8::1", "192.0.2.1"), "tcp4", "wan", ""},
		{"the other queue", "", "tcp", addrs("198.51.100.1"), "tcp4", "lte", ""},
		{"a tune of wan refuses lte's route", "wan", "tcp", addrs("198.51.100.1"), "", "", "the route to 198.51.100.1 leaves by wwan0, which no queue shapes (queues: wan on wan)"},
		{"nowhere shaped", "", "tcp", addrs("203.0.113.1"), "", "", "leaves by eth3, which no queue shapes (queues: wan on wan, lte on wwan0)"},
		{"-6 and only v6 off the path", "", "tcp6", addrs("2001:db8::1", "192.0.2.1"), "", "", "leaves by 6in4-henet"},
		{"no route", "", "tcp", addrs("192.0.2.99"), "", "", "no route"},
	} {
		paths := Paths("../linkinfo/testdata/pppoe-vlan", qs, c.addrs, route)
		n, q, err := Choose(paths, qs, c.want, c.network)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "fix:")):
			t.Errorf("%s: err %v, want one with %q and a fix", c.name, err, c.err)
		case c.err == "" && (err != nil || n != c.gotNet || q.Section != c.gotQueue):
			t.Errorf("%s: %q %q %v, want %q %q", c.name, n, q.Section, err, c.gotNet, c.gotQueue)
		}
	}
}

// TestCheck: each loaded phase's goodput beside the shaper's count, from
// counters sampled twice a second: agreeing, bypassed (offload) and
// shared (other traffic), each disagreement a note.
func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	res := func() *bbresult.Result {
		return &bbresult.Result{Started: t0, Phases: []bbresult.Phase{
			{Name: "idle", Start: 0, End: 5},
			{Name: "download", Start: 5, End: 15, DownloadMbps: 36, UploadMbps: 0.05},
			{Name: "upload", Start: 15, End: 25, UploadMbps: 7.2},
			{Name: "bidirectional", Start: 25, End: 35, DownloadMbps: 30, UploadMbps: 6},
		}}
	}
	// samples: cumulative bytes with the given Mbit/s per phase
	samples := func(down, up [3]float64) []Sample {
		var out []Sample
		var d, u float64
		for ms := 0; ms <= 40000; ms += 500 {
			s := float64(ms) / 1000
			i := -1
			switch {
			case s > 5 && s <= 15:
				i = 0
			case s > 15 && s <= 25:
				i = 1
			case s > 25 && s <= 35:
				i = 2
			}
			if i >= 0 {
				d += down[i] * 1e6 / 8 * 0.5
				u += up[i] * 1e6 / 8 * 0.5
			}
			out = append(out, Sample{At: t0.Add(time.Duration(ms) * time.Millisecond), Down: uint64(d), Up: uint64(u)})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		down, up [3]float64
		verdicts string
		note     string
	}{
		{"agrees (frames a few % above goodput, ACKs)", [3]float64{37.9, 0.2, 31.5}, [3]float64{0.9, 7.5, 7.1}, "download agrees, upload agrees, download agrees, upload agrees", ""},
		{"offloaded: the shaper saw a fifth", [3]float64{7.2, 0.2, 6}, [3]float64{0.9, 7.5, 7.1}, "download bypassed, upload agrees, download bypassed, upload agrees", "download: queue wan's shaper counted 7.2 Mbit/s of the test's 36.0 Mbit/s download: the rest did not pass it"},
		{"a second client downloading", [3]float64{60, 0.2, 55}, [3]float64{0.9, 7.5, 7.1}, "download shared, upload agrees, download shared, upload agrees", "about 24.0 Mbit/s of other traffic shared the link"},
	} {
		r := res()
		checks := Check(r, "wan", samples(c.down, c.up))
		var got []string
		for _, k := range checks {
			got = append(got, k.Direction+" "+k.Verdict)
		}
		if strings.Join(got, ", ") != c.verdicts {
			t.Errorf("%s: %q, want %q", c.name, strings.Join(got, ", "), c.verdicts)
		}
		notes := strings.Join(r.Notes, "\n")
		if c.note == "" && notes != "" || c.note != "" && !strings.Contains(notes, c.note) {
			t.Errorf("%s: notes %q, want %q", c.name, notes, c.note)
		}
	}
	r := res()
	if Check(r, "wan", nil) != nil || !strings.Contains(strings.Join(r.Notes, ""), "no shaper counters were read") {
		t.Errorf("no samples: notes %q", r.Notes)
	}
}

// TestCheckSparseReads: a busy host reads the counters seconds apart; a
// phase's edge then falls in a long span whose bytes are spread evenly,
// and the bounds widen by it, so a test that was the only traffic is not
// called shared; reads too far apart judge nothing and say so.
func TestCheckSparseReads(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// idle 0-2 s, upload 2-4.5 s at 6.8 Mbit/s, idle after; the shaper
	// counts 3 % over goodput
	bytesAt := func(s float64) uint64 {
		return uint64(min(max(s-2, 0), 2.5) * 6.8 * 1.03 * 1e6 / 8)
	}
	for _, c := range []struct {
		name    string
		reads   []float64 // seconds
		verdict string
	}{
		{"reads every half second", []float64{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6}, "agrees"},
		// the edges fall mid-span: interpolation counts 40 % too much
		{"a starved sampler", []float64{0, 1.6, 2.4, 4.1, 5.3, 6}, "agrees"},
		{"one read before and one after", []float64{0, 6}, ""},
	} {
		var ss []Sample
		for _, r := range c.reads {
			ss = append(ss, Sample{At: t0.Add(time.Duration(r * float64(time.Second))), Up: bytesAt(r)})
		}
		res := &bbresult.Result{Started: t0, Phases: []bbresult.Phase{{Name: "upload", Start: 2, End: 4.5, UploadMbps: 6.8}}}
		checks := Check(res, "wan", ss)
		got := ""
		for _, k := range checks {
			got = k.Verdict
		}
		if got != c.verdict || c.verdict == "" && !strings.Contains(strings.Join(res.Notes, ""), "not checked") {
			t.Errorf("%s: verdict %q (%+v), want %q; notes %q", c.name, got, checks, c.verdict, res.Notes)
		}
	}
}
