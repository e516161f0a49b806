package report

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Compare prints run a (before) and run b (after) side by side with the
// change from a to b, phase by phase, for `sqmkit test --compare A B`.
// The table fits 80 columns; the server addresses, as long as the user
// made them, stand above it so they cannot widen it.
func Compare(w io.Writer, a, b *bbresult.Result) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "A (before): server %s\nB (after):  server %s\n\n", a.ServerAddr, b.ServerAddr)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	row := func(label, va, vb, change string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", label, va, vb, change) }
	row("", "A (before)", "B (after)", "change")
	// a run cut short is marked and its figures compared with nothing: a
	// change against half a measurement is no change (+369 % once)
	whole := a.Incomplete == "" && b.Incomplete == ""
	if !whole {
		row("INCOMPLETE", cutShort(a), cutShort(b), "")
	}
	delta := func(va, vb float64, rel bool) string {
		if !whole {
			return ""
		}
		return delta(va, vb, rel)
	}
	row("started (UTC)", a.Started.UTC().Format("2006-01-02 15:04"), b.Started.UTC().Format("2006-01-02 15:04"), "")
	row("family", a.Family, b.Family, "")
	row("streams", fmt.Sprint(a.Streams), fmt.Sprint(b.Streams), "")
	row("idle RTT ms", num(a.IdleRTT), num(b.IdleRTT), delta(a.IdleRTT, b.IdleRTT, false))
	row("grade DSLReports", gradeMs(a.Grades.DSLReports, a.Grades.DSLReportsAddedMs), gradeMs(b.Grades.DSLReports, b.Grades.DSLReportsAddedMs),
		delta(a.Grades.DSLReportsAddedMs, b.Grades.DSLReportsAddedMs, false)+" ms")
	row("grade p95", gradeMs(a.Grades.Percentile, a.Grades.PercentileAddedMs), gradeMs(b.Grades.Percentile, b.Grades.PercentileAddedMs),
		delta(a.Grades.PercentileAddedMs, b.Grades.PercentileAddedMs, false)+" ms")

	for _, name := range phaseNames(a, b) {
		pa, oka := phase(a, name)
		pb, okb := phase(b, name)
		row(name, "", "", "")
		metric := func(label string, va, vb float64, rel bool) {
			switch {
			case oka && okb:
				row("  "+label, num(va), num(vb), delta(va, vb, rel))
			case oka:
				row("  "+label, num(va), "-", "")
			default:
				row("  "+label, "-", num(vb), "")
			}
		}
		if !isIdle(name) {
			metric("down Mbit/s", pa.DownloadMbps, pb.DownloadMbps, true)
			metric("up Mbit/s", pa.UploadMbps, pb.UploadMbps, true)
		}
		metric("RTT median ms", pa.Latency.Median, pb.Latency.Median, false)
		metric("RTT p95 ms", pa.Latency.P95, pb.Latency.P95, false)
		if !isIdle(name) {
			metric("added mean ms", pa.AddedMean, pb.AddedMean, false)
			metric("added up ms", pa.AddedUp, pb.AddedUp, false)
			metric("added down ms", pa.AddedDown, pb.AddedDown, false)
			metric("in-flow median ms", pa.InFlow.Median, pb.InFlow.Median, false)
		}
		metric("loss %", lossPct(pa), lossPct(pb), false)
		if !isIdle(name) {
			row("  grade", orDash(pa.Grade), orDash(pb.Grade), "")
		}
	}
	tw.Flush()
	// A different server or family changes the path, and with it the
	// baseline: the change column would then not be the queue's doing.
	if a.ServerAddr != b.ServerAddr || a.Family != b.Family {
		writeNote(ew, "the runs used different servers or address families; differences may come from the path, not the queue.")
	}
	if a.Streams != b.Streams {
		writeNote(ew, "the runs used different stream counts; more streams fill a queue faster.")
	}
	return ew.err
}

func gradeMs(g string, ms float64) string {
	return fmt.Sprintf("%s (%s ms)", orDash(g), bbresult.Fixed(ms, 1))
}

// delta prints b−a; rates also get the relative change, which is what
// matters when SQM trades a few percent of goodput for latency.
// cutShort marks a run that is not whole.
func cutShort(r *bbresult.Result) string {
	if r.Incomplete != "" {
		return "yes, not graded"
	}
	return "no"
}

func delta(a, b float64, rel bool) string {
	if math.IsNaN(a) || math.IsNaN(b) {
		return ""
	}
	s := bbresult.Signed(b-a, 1)
	if rel && a != 0 {
		s += fmt.Sprintf(" (%s%%)", bbresult.Signed(100*(b-a)/a, 1))
	}
	return s
}

func lossPct(p bbresult.Phase) float64 {
	if p.ProbesSent == 0 {
		return math.NaN()
	}
	return 100 * float64(p.LostUp+p.LostDown) / float64(p.ProbesSent)
}

// phaseNames lists a's phases, then any only b has, so runs with different
// phase plans still line up by name.
func phaseNames(a, b *bbresult.Result) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range []*bbresult.Result{a, b} {
		for _, p := range r.Phases {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	return names
}

func phase(r *bbresult.Result, name string) (bbresult.Phase, bool) {
	for _, p := range r.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return bbresult.Phase{}, false
}
