package autorate

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/cpuload"
)

// TestMetricsParseAsPrometheus: what autorate serves is read by
// Prometheus' own text parser (prometheus/common's expfmt), label values
// with quotes, a newline and non-ASCII text included, each value intact.
func TestMetricsParseAsPrometheus(t *testing.T) {
	m := &Metrics{CPU: func() (cpuload.Record, bool) {
		return cpuload.Record{At: time.Unix(1700000000, 0), Qdisc: "cake", Phases: []bbresult.PhaseCPU{{Phase: "download", MsPerMbit: 3.5, Busiest: 1, BusiestShare: 0.625, CeilingMbps: 64}}}, true
	}}
	m.rate, m.load = [2]int{40000, 8000}, [2]int{1000, 0}
	odd := "réflecteur \"a\"\nb\\c\td\x01"
	m.sample(Raw{Path: odd, Ms: 25}, 5)
	m.sample(Raw{Path: "192.0.2.1", Ms: 20}, 1)
	var b strings.Builder
	m.Write(&b)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("Prometheus' parser: %v\n%s", err, b.String())
	}
	for _, name := range []string{"sqmkit_autorate_rate_bits_per_second", "sqmkit_autorate_state", "sqmkit_autorate_changes_total", "sqmkit_cpu_ceiling_bits_per_second", "sqmkit_cpu_busiest_core_ratio"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	found := false
	for _, mt := range fams["sqmkit_autorate_added_delay_seconds"].GetMetric() {
		for _, l := range mt.GetLabel() {
			if l.GetName() == "path" && l.GetValue() == odd {
				found = true
				if v := mt.GetGauge().GetValue(); v != 0.005 {
					t.Errorf("added delay of %q: %v", odd, v)
				}
			}
		}
	}
	if !found {
		t.Errorf("the path label %q did not come back intact:\n%s", odd, b.String())
	}
}
