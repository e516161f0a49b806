package report

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
)

func TestWriteSummary(t *testing.T) {
	withExtras := reporttest.Result(reporttest.Shaped())
	withExtras.Family = "ipv4"
	withExtras.ServerAddr = "192.0.2.7:7070"
	withExtras.Notes = []string{"path looks asymmetric: upstream one-way delay 3 ms above downstream",
		"server ended the test early: byte budget of 25 GB reached during download; download is incomplete and upload, bidirectional, idle_after did not run"}
	withExtras.CPU = []bbresult.PhaseCPU{
		{Phase: "download", ShapedMbps: 37.2, CPUs: 4, MsPerMbit: 3.1, Busiest: 1, BusiestShare: 0.62, BusiestSoftirq: 0.8, CeilingMbps: 60},
		{Phase: "bidirectional", ShapedMbps: 1043.5, CPUs: 4, MsPerMbit: 12.25, Busiest: 3, BusiestShare: 0.97, BusiestSoftirq: 0.9, CeilingMbps: 1075, Bound: true},
	}
	withExtras.RPM = &bbresult.RPM{URL: "https://192.0.2.7/config", RPM: 2150, DownloadMbps: 88, UploadMbps: 17}

	// A responsiveness server's run: round trips only, no one-way split.
	rttOnly := reporttest.Result(reporttest.Bloated())
	rttOnly.RTTOnly, rttOnly.Grades.Basis = true, bbresult.BasisHandshakes

	for name, r := range map[string]*bbresult.Result{
		"bloated":  reporttest.Result(reporttest.Bloated()),
		"extras":   withExtras,
		"rtt-only": rttOnly,
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteSummary(&buf, r); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, want := range []string{
				r.ServerAddr, r.Server, bbresult.FamilyName(r.Family),
				"idle RTT " + IdleRTT(r.IdleRTT) + " ms",
				fmt.Sprintf("Grade %-2s (DSLReports) %6.1f ms", r.Grades.DSLReports, r.Grades.DSLReportsAddedMs), FormulaDSLReports,
				fmt.Sprintf("Grade %-2s (p95)        %6.1f ms", r.Grades.Percentile, r.Grades.PercentileAddedMs), FormulaPercentile, "idle_before",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("summary lacks %q:\n%s", want, out)
				}
			}
			for _, n := range r.Notes {
				if !strings.Contains(strings.Join(strings.Fields(out), " "), "Note: "+n) {
					t.Errorf("note %q missing", n)
				}
			}
			if r.RTTOnly != strings.Contains(out, "TCP handshake to the server") || r.RTTOnly != strings.Contains(out, "Both grades use the TCP handshakes") {
				t.Errorf("rtt_only %v, but the legend says otherwise:\n%s", r.RTTOnly, out)
			}
			for _, c := range r.CPU {
				if want := fmt.Sprintf("%s %.1f Mbit/s %.1f ms/Mbit cpu%d %.0f%% (%.0f%% softirq) max ~%.0f", c.Phase, c.ShapedMbps, c.MsPerMbit, c.Busiest, 100*c.BusiestShare, 100*c.BusiestSoftirq, c.CeilingMbps); !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
					t.Errorf("CPU line lacks %q:\n%s", want, out)
				}
			}
			if bound := slices.ContainsFunc(r.CPU, func(c bbresult.PhaseCPU) bool { return c.Bound }); bound != strings.Contains(out, "CPU-bound at 1044 Mbit/s (bidirectional): cpu3 was saturated") {
				t.Errorf("CPU-bound %v, summary:\n%s", bound, out)
			}
			if r.RPM != nil && !strings.Contains(out, fmt.Sprintf("RPM %.0f: responsiveness against %s", r.RPM.RPM, r.RPM.URL)) {
				t.Errorf("RPM missing:\n%s", out)
			}
			lines := strings.Split(out, "\n")
			for _, l := range lines {
				// Server names and URLs are as long as the user made them.
				free := strings.Contains(l, r.Server) || r.RPM != nil && strings.Contains(l, r.RPM.URL)
				if n := utf8.RuneCountInString(l); n > 80 && !free {
					t.Errorf("line of %d columns, want ≤ 80: %q", n, l)
				}
			}
			checkTables(t, r, out)
		})
	}
}

// TestSummaryRoute: a test run on the router names the queue its route
// took and whether its shaper counted what the test moved.
func TestSummaryRoute(t *testing.T) {
	for _, c := range []struct {
		checks []bbresult.PathCheck
		want   string
	}{
		{nil, "Route: through queue wan.\n"},
		{[]bbresult.PathCheck{{Verdict: "agrees"}, {Verdict: "agrees"}}, "Route: through queue wan; its shaper counted what the test moved in every loaded phase.\n"},
		{[]bbresult.PathCheck{{Verdict: "agrees"}, {Verdict: "bypassed"}}, "disagree with the goodput in 1 of 2 loaded directions"},
	} {
		r := reporttest.Result(reporttest.Shaped())
		r.Queue, r.PathChecks = "wan", c.checks
		var buf bytes.Buffer
		if err := WriteSummary(&buf, r); err != nil || !strings.Contains(buf.String(), c.want) {
			t.Errorf("%v: %v, summary lacks %q:\n%s", c.checks, err, c.want, buf.String())
		}
	}
	var buf bytes.Buffer
	WriteSummary(&buf, reporttest.Result(reporttest.Shaped()))
	if strings.Contains(buf.String(), "Route:") {
		t.Errorf("a test off a router names a route:\n%s", buf.String())
	}
}

// tableRow returns the whitespace-separated cells of the row for phase.
func tableRow(t *testing.T, out, phase string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == phase {
			return f
		}
	}
	t.Fatalf("no row for phase %s in:\n%s", phase, out)
	return nil
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

func TestWritersReportErrors(t *testing.T) {
	r := reporttest.Result(reporttest.Bloated())
	for _, c := range []struct {
		name  string
		write func(*failWriter) error
		after []int // successful writes before the failure
	}{
		{"summary", func(w *failWriter) error { return WriteSummary(w, r) }, []int{0, 3}},
		{"compare", func(w *failWriter) error { return Compare(w, r, r) }, []int{0, 3}},
		{"json", func(w *failWriter) error { return WriteJSON(w, r) }, []int{0}}, // one write
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, after := range c.after {
				if err := c.write(&failWriter{after: after}); err == nil {
					t.Errorf("write error after %d writes not returned", after)
				}
			}
		})
	}
}

// checkTables checks out's two tables against r: every phase's figures,
// and every loaded phase's added latency and grade (idle ones are the
// baseline).
func checkTables(t *testing.T, r *bbresult.Result, out string) {
	t.Helper()
	added := strings.Index(out, "loaded phase")
	if added < 0 {
		t.Fatalf("no added-latency table:\n%s", out)
	}
	for _, p := range r.Phases {
		got := tableRow(t, out[:added], p.Name)
		want := []string{p.Name, num(p.DownloadMbps), num(p.UploadMbps),
			num(p.Latency.Median), num(p.Latency.P95), num(p.Latency.P99),
			num(p.InFlow.Median), pct(p.LostUp, p.ProbesSent), pct(p.LostDown, p.ProbesSent),
			fmt.Sprint(p.Reordered)}
		if isIdle(p.Name) {
			want[6] = "-" // no in-flow samples without load
		}
		if r.RTTOnly {
			want[8] = "-" // a lost handshake's direction is unknown
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %s:\n got %q\nwant %q", p.Name, got, want)
		}
		if isIdle(p.Name) {
			// Idle rows are the baseline: no added latency, no grade.
			if strings.Contains(out[added:], "\n"+p.Name+" ") {
				t.Errorf("idle phase %s in the added-latency table", p.Name)
			}
			continue
		}
		got = tableRow(t, out[added:], p.Name)
		want = []string{p.Name, num(p.AddedMean), num(p.AddedMedian), num(p.AddedP95),
			num(p.AddedUp), num(p.AddedDown), p.Grade}
		if r.RTTOnly {
			want[4], want[5] = "-", "-"
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("added row %s:\n got %q\nwant %q", p.Name, got, want)
		}
	}
}
