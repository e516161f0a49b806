package rpcd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// TestMarks: ECN marks from fq_codel's counter and cake's marks row (a
// column per tin); a cake_mq root leaves them to its instances.
func TestMarks(t *testing.T) {
	for _, c := range []struct {
		r    tcstats.Record
		want uint64
	}{
		{tcstats.Record{Kind: "fq_codel", Counters: []tcstats.Option{{Key: "ecn_mark", Value: "7"}}}, 7},
		{tcstats.Record{Kind: "cake", Lines: []string{"                   Bulk  Best Effort        Voice", "  marks              3            0            2"}}, 5},
		{tcstats.Record{Kind: "cake_mq", Lines: []string{"  marks              3"}}, 0},
	} {
		if got := marks(&c.r); got != c.want {
			t.Errorf("%s: %d marks, want %d", c.r.Kind, got, c.want)
		}
	}
}

// TestDoctorWorstFirst: the findings come back failures first, then
// warnings, then what is fine.
func TestDoctorWorstFirst(t *testing.T) {
	e, _ := router(t)
	e.Doctor = func(doctor.Options) (*doctor.Diagnosis, error) {
		return &doctor.Diagnosis{Findings: []doctor.Finding{{Severity: doctor.OK, ID: "egress"}, {Severity: doctor.Fail, ID: "ifb-down"},
			{Severity: doctor.Warn, ID: "mismatch", Fix: "Re-apply the config"}}}, nil
	}
	got := call(t, e, "doctor", "")
	var ids []string
	for _, f := range got["findings"].([]any) {
		ids = append(ids, f.(map[string]any)["id"].(string))
	}
	if len(ids) != 3 || ids[0] != "ifb-down" || ids[1] != "mismatch" || ids[2] != "egress" {
		t.Errorf("findings in order %v", ids)
	}
}

// TestAutorateSections: a section with autorate shows its daemon's status
// file, running while the file is fresh.
func TestAutorateSections(t *testing.T) {
	e, _ := router(t)
	path := autorate.StatusPath(e.Root, "wan")
	os.MkdirAll(filepath.Dir(path), 0o755)
	for _, c := range []struct {
		age     time.Duration
		running bool
	}{{5 * time.Second, true}, {time.Minute, false}} {
		b, _ := json.Marshal(autorate.Status{At: e.Now().Add(-c.age), Min: [2]int{4000, 2000}, Rate: [2]int{18000, 9000},
			History: []autorate.Point{{T: e.Now().Unix(), Rate: [2]int{18000, 9000}, Added: map[string]float64{"down": 1.5}}}})
		os.WriteFile(path, b, 0o644)
		got := call(t, e, "autorate", "")
		s := got["sections"].([]any)[0].(map[string]any)
		st, _ := s["status"].(map[string]any)
		if s["section"] != "wan" || s["running"] != c.running || st == nil || len(st["history"].([]any)) != 1 {
			t.Errorf("%v old: %v", c.age, s)
		}
	}
}

// TestDoctorCPU: a test or tune's CPU record reaches LuCI's status page
// through the doctor: a CPU-bound queue is a warning with the fix.
func TestDoctorCPU(t *testing.T) {
	e, _ := router(t)
	rec := cpuload.Record{Section: "wan", At: e.Now(), By: "tune", Qdisc: "cake", Phases: []bbresult.PhaseCPU{
		{Phase: "download", ShapedMbps: 15, CPUs: 1, BusiestShare: 0.96, CeilingMbps: 15.6, Bound: true}}}
	if err := cpuload.Save(e.Root, rec); err != nil {
		t.Fatal(err)
	}
	got := call(t, e, "doctor", "")
	found := false
	for _, f := range got["findings"].([]any) {
		m := f.(map[string]any)
		found = found || m["id"] == "cpu-bound" && strings.Contains(fmt.Sprint(m["fix"]), "This router shapes about 15 Mbit/s with cake")
	}
	if !found {
		t.Errorf("no cpu-bound finding: %v", got)
	}
}
