package search

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Over IPv6 a full-size packet carries 20 bytes less payload, so the same
// goodput is a higher shaper rate; the probes that ran beside the streams
// are part of what the line carried.
func TestLineRate(t *testing.T) {
	c := searchConfig()
	c.ProbeKbit = 80
	for _, v6 := range []bool{false, true} {
		s := newSim()
		s.v6 = v6
		s.SetRates(context.Background(), 400000, 80000)
		r := &searcher{l: s, c: c, r: &Result{}}
		l, err := r.line(context.Background(), Download)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(l.GoodputKbit) * c.RatePerGoodput
		if v6 {
			want *= 1448.0 / 1428
		}
		want += c.ProbeKbit
		if math.Abs(float64(l.RateKbit)-want) > 1 {
			t.Errorf("IPv6 %v: line rate %d for %d kbit/s goodput, want %.0f", v6, l.RateKbit, l.GoodputKbit, want)
		}
	}
}

// The line is what the link carries, read from per-second goodput a
// stalling guest (or host) skews: a stalled second's bytes arrive in the
// next one's count, and the last second is the streams' teardown.
func TestLineSeries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series []int
		want   int // kbit/s goodput, ±3 %
	}{
		{"steady", []int{7000, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600}, 7600},
		// lab, cable upload: the window's first second was the catch-up of a stall
		{"stall at the window's start", []int{6423, 7733, 7471, 7602, 7471, 7733, 4456, 10485, 6029, 9044, 7340, 7733}, 7500},
		// lab, cable-boost upload: stalls every other second, the teardown last
		{"stalls and teardown", []int{6000, 8000, 7700, 7600, 5243, 9962, 5898, 9177, 7600, 7500, 7600, 4194}, 7500},
		// lab, cable × nss upload with the kernel's counts: the stall before the window, its catch-up inside
		{"stall just before the window", []int{6815, 7340, 7604, 7340, 7864, 7471, 5243, 9568, 6294, 9044, 7602, 7209}, 7550},
		// lab, the next run: the window's median is the stall's and its catch-up's
		{"stall before a window of stalls", []int{7211, 7504, 7550, 7532, 7522, 7542, 6224, 8953, 7550, 5387, 9623, 7563}, 7540},
		// lab, cable download
		{"download with a stall", []int{35511, 38011, 37865, 38011, 37879, 38143, 37879, 38273, 37880, 38014, 37747, 38158, 38129, 33946, 41943,
			38142, 37881, 37751, 38141, 37878, 37883, 38009, 37879, 37880, 38012, 38011, 23462, 52430, 38010, 38141}, 37950},
		// lab, adsl-atm upload at 1 Mbit/s behind an 800 ms FIFO: the seconds
		// alternate with the ACKs' clumps; no boost, and the link carries 745
		// kbit/s of TCP goodput beside the probes
		{"alternating seconds", []int{455, 1045, 776, 521, 937, 746, 399, 835, 1066, 695, 568, 972}, 745},
		// lab, adsl-atm upload against sqmkit serve: two stalled seconds,
		// their catch-up last; without it the line read 705, where the
		// reference server's line in the same run read 808
		{"catch-up last", []int{317, 1225, 752, 294, 1208, 734, 727, 672, 847, 410, 408, 1454}, 750},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim()
			s.series = tc.series
			r := &searcher{l: s, c: searchConfig(), r: &Result{}}
			l, err := r.line(context.Background(), Upload)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(l.GoodputKbit-tc.want)) > 0.03*float64(tc.want) {
				t.Errorf("line %d kbit/s, want %d ± 3 %%", l.GoodputKbit, tc.want)
			}
			if l.BoostKbit != 0 {
				t.Errorf("a boost of %d kbit/s in a line without one", l.BoostKbit)
			}
		})
	}
}

// Behind a boost the line is the last third of the phase, and a stall in
// its last second, whose catch-up falls in the second left out, is left
// out too: behind a boost no step looks above the line to correct it.
func TestLineBoostStallAtEnd(t *testing.T) {
	s := newSim()
	s.series = []int{42585, 45642, 45638, 45655, 45635, 45558, 45643, 45601, 45603, 45580, 38989, 38022, 38021, 38016, 22525,
		53471, 38006, 38305, 37757, 38021, 38018, 38023, 23044, 52889, 38005, 38009, 38020, 38043, 29336, 46541}
	r := &searcher{l: s, c: searchConfig(), r: &Result{}}
	l, err := r.line(context.Background(), Download)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(l.GoodputKbit-38020)) > 0.005*38020 {
		t.Errorf("line %d kbit/s, want 38020 ± 0.5 %%", l.GoodputKbit)
	}
	if l.BoostKbit < 45000 {
		t.Errorf("boost %d kbit/s, want the plateau's 45600", l.BoostKbit)
	}
}

// TestLineCPUBound: a line measured while the router's busiest core was
// saturated is the router's ceiling: the line says so (and the search
// goes on below it), and whose, when tune's own load and TLS shared the
// core; a core with room to spare says nothing.
func TestLineCPUBound(t *testing.T) {
	for _, tc := range []struct {
		bound bool
		self  float64 // cores tune's own load took
		want  string
	}{
		{false, 0, ""},
		{true, 0, "CPU-bound: cpu1 was busy 97% of it (90% softirq): that is the router's ceiling, not the line's"},
		{true, 1.1, "CPU-bound: cpu1 was busy 97% of it (90% softirq): that is the router's ceiling while tune's own load and TLS took 110% of a core"},
	} {
		s := newSim()
		s.SetRates(context.Background(), 400000, 80000)
		s.lineCPU = &bbresult.PhaseCPU{Phase: "download", Busiest: 1, BusiestShare: 0.97, BusiestSoftirq: 0.9, SelfCores: tc.self, Bound: tc.bound}
		var said []string
		r := &searcher{l: s, c: searchConfig(), r: &Result{}}
		r.c.Progress = func(m string) { said = append(said, m) }
		l, err := r.line(context.Background(), Download)
		if err != nil {
			t.Fatal(err)
		}
		msg := strings.Join(said, "\n")
		if (l.CPU != nil) != tc.bound || strings.Contains(msg, "CPU-bound") != tc.bound || !strings.Contains(msg, tc.want) {
			t.Errorf("bound %v, self %.1f: line CPU %+v, said %q, want %q", tc.bound, tc.self, l.CPU, msg, tc.want)
		}
	}
}
