package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
)

func TestCompare(t *testing.T) {
	before := reporttest.Result(reporttest.Bloated())
	after := reporttest.Result(reporttest.Shaped())
	otherServer := reporttest.Result(reporttest.Shaped())
	otherServer.ServerAddr, otherServer.Family = "192.0.2.7:7070", "ipv4"
	extraPhase := reporttest.Result(reporttest.Shaped())
	extraPhase.Phases = append(extraPhase.Phases, bbresult.Phase{Name: "rpm", DownloadMbps: 80, ProbesSent: 10})
	// The widest values a real pair of runs gives: a long IPv6 literal, a
	// multi-gigabit rate against an idle direction, another stream count.
	wide := reporttest.Result(reporttest.Shaped())
	wide.ServerAddr, wide.Streams = "[2001:db8:1234:5678:9abc:def0:1234:5678]:7070", 16
	wide.Phases[1].UploadMbps, wide.Phases[1].AddedMean = 9400, 1234.5
	wide.Grades.DSLReports, wide.Grades.DSLReportsAddedMs = "F", 1234.5

	for _, c := range []struct {
		name   string
		b      *bbresult.Result
		want   []string // rows, whitespace-normalised
		absent []string
	}{
		{"sqm fixes bloat", after, []string{
			"grade DSLReports " + gradeMs(before.Grades.DSLReports, before.Grades.DSLReportsAddedMs) + " " +
				gradeMs(after.Grades.DSLReports, after.Grades.DSLReportsAddedMs) + " " +
				delta(before.Grades.DSLReportsAddedMs, after.Grades.DSLReportsAddedMs, false) + " ms",
			"down Mbit/s " + num(before.Phases[1].DownloadMbps) + " " + num(after.Phases[1].DownloadMbps) + " " +
				delta(before.Phases[1].DownloadMbps, after.Phases[1].DownloadMbps, true),
			"added mean ms " + num(before.Phases[1].AddedMean) + " " + num(after.Phases[1].AddedMean) + " " +
				delta(before.Phases[1].AddedMean, after.Phases[1].AddedMean, false),
			"grade " + before.Phases[3].Grade + " " + after.Phases[3].Grade,
		}, []string{"Note:"}},
		{"different path", otherServer, []string{"Note: the runs used different servers or address families"}, nil},
		{"phase only in B", extraPhase, []string{"rpm", "down Mbit/s - 80.0"}, nil},
		{"wide values", wide, []string{"B (after): server " + wide.ServerAddr, "up Mbit/s " + num(before.Phases[1].UploadMbps) + " 9400.0 " +
			delta(before.Phases[1].UploadMbps, 9400, true), "Note: the runs used different stream counts"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Compare(&buf, before, c.b); err != nil {
				t.Fatal(err)
			}
			var rows []string
			for _, l := range strings.Split(buf.String(), "\n") {
				rows = append(rows, strings.Join(strings.Fields(l), " "))
				// Server addresses are as long as the user made them.
				free := strings.Contains(l, before.ServerAddr) || strings.Contains(l, c.b.ServerAddr)
				if n := utf8.RuneCountInString(l); n > 80 && !free {
					t.Errorf("line of %d columns, want ≤ 80: %q", n, l)
				}
			}
			out := strings.Join(rows, "\n")
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(out, a) {
					t.Errorf("unexpected %q in:\n%s", a, out)
				}
			}
		})
	}
}

func TestDelta(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		rel  bool
		want string
	}{
		{100, 95, true, "-5.0 (-5.0%)"},
		{0, 5, true, "+5.0"},
		{250, 4, false, "-246.0"},
		{1, 1, false, "+0.0"},
	} {
		if got := delta(c.a, c.b, c.rel); got != c.want {
			t.Errorf("delta(%v, %v, %v) = %q, want %q", c.a, c.b, c.rel, got, c.want)
		}
	}
}
