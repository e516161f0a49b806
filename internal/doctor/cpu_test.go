package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/cpuload"
)

// TestCPUFindings: the last CPU measurement of the queue is judged
// against its shaper's rate: a saturated core is cpu-bound with the fix, a
// ceiling under the rate a cpu-ceiling warning, room to spare said.
func TestCPUFindings(t *testing.T) {
	now := load(t, sample{qdisc: "tcstats/nss-flat-tc-s.txt"}, []string{"wan"})
	at := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		phases []bbresult.PhaseCPU
		want   string // severity and id
		text   []string
	}{
		{"bound", []bbresult.PhaseCPU{
			{Phase: "download", ShapedMbps: 0.1, CeilingMbps: 300},
			{Phase: "upload", ShapedMbps: 120, CPUs: 2, Busiest: 1, BusiestShare: 0.97, BusiestSoftirq: 0.9, NetRxShare: 0.99, CeilingMbps: 124, Bound: true},
		}, "warn cpu-bound", []string{"This router shapes about 120 Mbit/s with cake", "spread packet processing over the 2 cores", "upload at 120.0 Mbit/s shaped, cpu1 busy 97%", "receive softirqs 99% on cpu0", "RPS off, XPS off"}},
		{"ceiling under the rate", []bbresult.PhaseCPU{
			{Phase: "upload", ShapedMbps: 100, CPUs: 1, BusiestShare: 0.8, CeilingMbps: 125},
		}, "warn cpu-ceiling", []string{"the shaper is set to 145 Mbit/s for upload", "ceiling ~125 Mbit/s"}},
		{"headroom", []bbresult.PhaseCPU{
			{Phase: "upload", ShapedMbps: 140, CPUs: 1, BusiestShare: 0.35, CeilingMbps: 400},
		}, "ok cpu-headroom", []string{"ceiling ~400 Mbit/s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := telekomPlan(t, 145000)
			e.CPU = &cpuload.Record{Section: "wan", At: at, By: "test", Qdisc: "cake", Phases: c.phases}
			r := Check(Input{Now: now, Expect: []Expect{e}})
			if ids(r)[c.want] != 1 {
				t.Fatalf("want one %s:\n%s", c.want, dump(r))
			}
			out := dump(r)
			for _, w := range c.text {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
		})
	}
	if r := Check(Input{Now: now, Expect: []Expect{telekomPlan(t, 145000)}}); strings.Contains(dump(r), "cpu-") {
		t.Errorf("no record, yet a CPU finding:\n%s", dump(r))
	}
}
