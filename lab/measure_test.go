package main

import (
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

func TestFirstP95(t *testing.T) {
	// A 30 s phase at 1 probe/s from t=5: a 100 ms spike in its first
	// second, steady 20 ms after; sqmkit's baseline is 20 ms.
	r := &bbresult.Result{}
	for i := 0; i < 30; i++ {
		rtt := 20.0
		if i == 0 {
			rtt = 120
		}
		r.Samples.Probes = append(r.Samples.Probes, bbresult.Probe{T: 5 + float64(i), RTT: rtt})
	}
	r.Samples.Probes = append(r.Samples.Probes, bbresult.Probe{T: 6.5, Lost: "down"})
	long := bbresult.Phase{Start: 5, End: 35, AddedP95: 5, Latency: bbresult.Stats{P95: 25}}
	got := firstP95(r, long)
	// First 10 s: one 120 among nine 20s -> p95 = 20 + 0.55*100 = 75 ms, added 55.
	if got == nil || math.Abs(*got-55) > 1e-9 {
		t.Errorf("firstP95 = %v, want 55", got)
	}
	if got := firstP95(r, bbresult.Phase{Start: 5, End: 15}); got != nil {
		t.Errorf("10 s phase: firstP95 = %v, want nil (the graded p95 already is the first 10 s)", *got)
	}
}

func TestIperfRates(t *testing.T) {
	js := `{"end":{"sum_received":{"bits_per_second":36000000},"sum_received_bidir_reverse":{"bits_per_second":30000000}}}`
	for _, tt := range []struct {
		phase    string
		down, up float64
	}{{accept.Download, 36, 0}, {accept.Upload, 0, 36}, {accept.Bidir, 30, 36}} {
		d, u, err := iperfRates(js, tt.phase)
		if err != nil || d != tt.down || u != tt.up {
			t.Errorf("%s: %v %v %v, want %v %v", tt.phase, d, u, err, tt.down, tt.up)
		}
	}
	if _, _, err := iperfRates(`{"error":"unable to connect to server"}`, accept.Download); err == nil || !strings.Contains(err.Error(), "unable to connect") {
		t.Errorf("iperf3 error not passed on: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {0.5, 3}, {0.95, 4.8}, {1, 5}} {
		if got := quantile(v, tt.q); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if v[0] != 5 {
		t.Error("quantile sorted its input in place")
	}
}
