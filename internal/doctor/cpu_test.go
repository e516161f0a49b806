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

// TestCakeMQFindings: a queue measured with cake_mq and with cake. cake_mq
// at 1.5 times cake's CPU per Mbit and no higher ceiling is flagged while
// it runs, with the way back; once cake runs it is an OK. cake_mq that
// shaped 40 % more is advised where cake runs. One record alone, or two of
// one qdisc, compares nothing.
func TestCakeMQFindings(t *testing.T) {
	now := load(t, sample{qdisc: "tcstats/nss-flat-tc-s.txt"}, []string{"wan"})
	at := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	rec := func(qdisc string, ms, ceiling float64, bound bool) *cpuload.Record {
		return &cpuload.Record{Section: "wan", At: at, By: "test", Qdisc: qdisc, Phases: []bbresult.PhaseCPU{
			{Phase: "download", ShapedMbps: 50, MsPerMbit: ms, CPUs: 4, BusiestShare: 0.5, CeilingMbps: ceiling, Bound: bound}}}
	}
	with := func(now, before *cpuload.Record) *cpuload.Record { now.Before = before; return now }
	for _, c := range []struct {
		name string
		r    *cpuload.Record
		want string
		text string
	}{
		{"cake_mq costly, running", with(rec("cake_mq", 30, 50, true), rec("cake", 20, 300, false)), "warn cake-mq-costly", "cake_mq costs 50% more CPU per Mbit than cake did on this router and shapes no more: drop it (option qdisc 'cake')"},
		{"cake_mq costly, cake running", with(rec("cake", 20, 300, false), rec("cake_mq", 30, 50, true)), "ok cake-mq-costly", "cake_mq (test of 2026-12-01 19:00 UTC): 30.00 ms CPU per shaped Mbit, shapes ~50 Mbit/s"},
		{"cake_mq gains", with(rec("cake", 20, 100, false), rec("cake_mq", 22, 140, false)), "warn cake-mq-gain", "cake_mq shaped 40% more than cake on this router"},
		{"alone", rec("cake_mq", 30, 50, true), "", ""},
		{"same qdisc", with(rec("cake_mq", 30, 50, true), rec("cake_mq", 20, 300, false)), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := telekomPlan(t, 145000)
			e.CPU = c.r
			r := Check(Input{Now: now, Expect: []Expect{e}})
			n := 0
			for id, k := range ids(r) {
				if strings.Contains(id, "cake-mq") {
					n += k
				}
			}
			if c.want == "" {
				if n != 0 {
					t.Errorf("a cake_mq finding without both records:\n%s", dump(r))
				}
				return
			}
			if ids(r)[c.want] != 1 || n != 1 || !strings.Contains(dump(r), c.text) {
				t.Errorf("want one %s with %q:\n%s", c.want, c.text, dump(r))
			}
		})
	}
}
