package rpm

import (
	"math"
	"slices"
	"testing"
)

func repeat(v float64, n int) []float64 { return slices.Repeat([]float64{v}, n) }

func seq(from, to float64) []float64 {
	var s []float64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

func TestTrimmedMean(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"one", []float64{7}, 7},
		{"under 20 samples nothing is dropped", []float64{3, 1, 2, 100}, 26.5},
		{"20 samples drop the slowest", append(seq(1, 19), 1000), 10},
		{"40 samples drop the two slowest", append(repeat(5, 38), 900, 800), 5},
		{"order does not matter", []float64{1000, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 10},
	} {
		if got := trimmedMean(tc.in); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: trimmedMean = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !math.IsNaN(trimmedMean(nil)) {
		t.Error("trimmedMean(nil) is not NaN")
	}
}

// The expected values are worked out by hand from the draft's formula, so a
// change to the aggregation (for instance back to the older draft's
// latency average, which gives 4000 in the first case) fails here.
func TestRPMFormula(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    latencies
		want float64
	}{
		// foreign = 60000/10 = 6000, loaded = 60000/20 = 3000
		{"equal handshakes", latencies{repeat(10, 5), repeat(10, 5), repeat(10, 5), repeat(20, 5)}, 4500},
		// foreign = 60000/((1+2+3)/3) = 30000, loaded = 60000/100 = 600
		{"fresh connections fast, loaded slow", latencies{repeat(1, 3), repeat(2, 3), repeat(3, 3), repeat(100, 3)}, 15300},
		// the 1000 ms outliers are the slowest 5% and are trimmed away:
		// foreign = 60000/((5+5+50)/3) = 3000, loaded = 60000/50 = 1200
		{"outliers trimmed", latencies{
			append(repeat(5, 19), 1000), append(repeat(5, 19), 1000),
			append(repeat(50, 19), 1000), append(repeat(50, 19), 1000),
		}, 2100},
	} {
		if got := tc.l.means().rpm(); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: rpm = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, l := range []latencies{
		{repeat(1, 3), repeat(1, 3), repeat(1, 3), nil},
		{nil, nil, nil, repeat(1, 3)},
		{repeat(0, 3), repeat(0, 3), repeat(0, 3), repeat(0, 3)},
	} {
		if got := l.means().rpm(); !math.IsNaN(got) {
			t.Errorf("rpm(%v) = %v, want NaN for missing or zero samples", l, got)
		}
	}
}

func TestStable(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want bool
	}{
		{[]float64{100, 100, 100}, false}, // fewer than MAD values
		{[]float64{100, 100, 100, 100}, true},
		{[]float64{1, 2, 100, 101, 99, 100}, true},   // only the last MAD count
		{[]float64{100, 100, 100, 130}, false},       // stddev 13 > 5% of 130
		{[]float64{100, 102, 98, 101}, true},         // stddev 1.6 < 5.05
		{[]float64{10, 20, 40, 80}, false},           // still ramping up
		{[]float64{200, 100, 100, 100, 100}, true},   // older ramp forgotten
		{[]float64{100, 100, 100, 100, 0}, false},    // collapse is not stable
		{[]float64{100, 100, 100, 100, 100.1}, true}, // tiny change is
	} {
		if got := stable(tc.in); got != tc.want {
			t.Errorf("stable(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestProbeRate(t *testing.T) {
	for _, tc := range []struct {
		bytesPerSec float64
		most        int
		want        float64
	}{
		{0, MaxRate, 1},
		{1.2e6, MaxRate, 10},     // 9.6 Mbit/s: 5% is 60 kB/s, 10 pairs of 6000 bytes
		{1.25e9, MaxRate, 100},   // 10 Gbit/s is capped at MPS
		{60000, MaxRate, 1},      // 480 kbit/s still gets one probe pair a second
		{6e6, MaxRate, 50},       // 48 Mbit/s
		{1.2e7, MaxRate, 100},    // 96 Mbit/s reaches MPS exactly
		{1.19e7, MaxRate, 99.17}, // just under
		{6e6, 10, 10},            // --rpm-rate 10 holds 48 Mbit/s's 50 to 10
		{6e5, 10, 5},             // under its cap PTC still rules
		{0, 10, 1},
	} {
		if got := probeRate(tc.bytesPerSec, tc.most); math.Abs(got-tc.want) > 0.01 {
			t.Errorf("probeRate(%v, %d) = %v, want %v", tc.bytesPerSec, tc.most, got, tc.want)
		}
	}
}

func TestMovingAverage(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{8}, 8},
		{[]float64{2, 4}, 3},
		{[]float64{1000, 1, 2, 3, 6}, 3},
	} {
		if got := movingAverage(tc.in); got != tc.want {
			t.Errorf("movingAverage(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The responsiveness is stable when the delay behind the load has stopped
// growing: a loaded GET that still climbs 8 % an interval behind foreign
// probes at 45 ms is not, though the RPM (a mean of rates, led by the fast
// foreign half) hardly moves; a steady one is, whatever its size.
func TestStabilityFollowsLoadedDelay(t *testing.T) {
	window := func(loaded ...float64) (rpm, delay []float64) {
		for _, l := range loaded {
			m := means{TCP: 45, TLS: 45, HTTPForeign: 45, HTTPSelf: l}
			rpm, delay = append(rpm, m.rpm()), append(delay, m.delay())
		}
		return rpm, delay
	}
	for _, tc := range []struct {
		name   string
		loaded []float64
		want   bool
	}{
		{"climbing 8 % an interval", []float64{1500, 1620, 1750, 1890}, false},
		{"steady at 1.9 s", []float64{1890, 1900, 1880, 1895}, true},
		{"steady at 50 ms", []float64{50, 51, 49, 50}, true},
	} {
		rpm, delay := window(tc.loaded...)
		if got := stable(delay); got != tc.want {
			t.Errorf("%s: stable(delay %v) = %v, want %v", tc.name, delay, got, tc.want)
		}
		if !stable(rpm) {
			t.Errorf("%s: the RPM %v was expected to look stable (the case the delay is for)", tc.name, rpm)
		}
	}
}
