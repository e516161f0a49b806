package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Formulas state how the two overall grades are computed; the summary
// prints them so a reader never has to guess what a letter means.
const (
	FormulaDSLReports = "mean of the download and upload phases' added mean\n    (added mean = loaded mean − idle_before mean)"
	FormulaPercentile = "worst p95 added latency of the loaded phases (p95 − idle_before median)"
	gradeScale        = "A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F ≥ 400"
)

// WriteSummary prints the human summary of one run: where it went, one row
// per phase, the two grades with their formulas, and the notes.
func WriteSummary(w io.Writer, r *bbresult.Result) error {
	ew := &errWriter{w: w}
	header(ew, r)
	fmt.Fprintln(ew)

	// tabwriter aligns every column right, which suits the numbers; the
	// phase names are padded here so they read left-aligned.
	width := len("phase")
	for _, p := range r.Phases {
		width = max(width, len(p.Name))
	}
	// Two tables, so each fits an 80-column terminal: what was measured,
	// then how much the load added over the idle_before baseline.
	tw := tabwriter.NewWriter(ew, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tdown\tup\tRTT\tRTT\tRTT\tin-flow\tloss\tloss\treord\t\n", width, "phase")
	fmt.Fprintf(tw, "%-*s\tMbit/s\tMbit/s\tmed\tp95\tp99\tmed\tup %%\tdown %%\t\t\n", width, "")
	for _, p := range r.Phases {
		lostDown := pct(p.LostDown, p.ProbesSent)
		if r.RTTOnly {
			lostDown = "-"
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
			width, p.Name, num(p.DownloadMbps), num(p.UploadMbps),
			stat(p.Latency, p.Latency.Median), stat(p.Latency, p.Latency.P95), stat(p.Latency, p.Latency.P99),
			stat(p.InFlow, p.InFlow.Median), pct(p.LostUp, p.ProbesSent), lostDown,
			p.Reordered)
	}
	tw.Flush()
	if r.RTTOnly {
		fmt.Fprintln(ew, "Latencies in ms. RTT: TCP handshake to the server. in-flow: request/response")
		fmt.Fprintln(ew, "time inside the loaded streams. loss: share of handshakes that failed, either")
		fmt.Fprintln(ew, "way (this server gives round trips only), under up %.")
	} else {
		fmt.Fprintln(ew, "Latencies in ms. RTT: UDP probe round trip. in-flow: request/response time")
		fmt.Fprintln(ew, "inside the loaded TCP streams. loss: share of probes sent.")
	}
	fmt.Fprintln(ew)
	fmt.Fprintf(tw, "%-*s\tadded\tadded\tadded\tadded\tadded\tgrade\t\n", width, "loaded phase")
	fmt.Fprintf(tw, "%-*s\tmean\tmed\tp95\tup\tdown\t\t\n", width, "")
	for _, p := range r.Phases {
		if isIdle(p.Name) {
			continue
		}
		up, down := num(p.AddedUp), num(p.AddedDown)
		if r.RTTOnly {
			up, down = "-", "-"
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", width, p.Name,
			num(p.AddedMean), num(p.AddedMedian), num(p.AddedP95), up, down, orDash(p.Grade))
	}
	tw.Flush()
	fmt.Fprintln(ew, "added: ms over the idle_before phase (the baseline; idle_after starts while")
	if r.RTTOnly {
		fmt.Fprintln(ew, "queues drain). up/down: not measured: this server gives round trips only.")
	} else {
		fmt.Fprintln(ew, "queues drain). up/down: one-way queueing delay client→server / server→client.")
	}
	fmt.Fprintln(ew)

	if r.Incomplete != "" {
		fmt.Fprintf(ew, "INCOMPLETE: not graded (%s); the figures above are what was measured until then\n", r.Incomplete)
		for _, n := range r.Notes {
			if n != r.Incomplete {
				writeNote(ew, n)
			}
		}
		return ew.err
	}
	g := r.Grades
	rpm := ""
	if r.RPM != nil {
		rpm = fmt.Sprintf("   RPM %.0f", r.RPM.RPM)
	}
	fmt.Fprintf(ew, "Grade %-2s (DSLReports) %6s ms%s\n  = %s\n", orDash(g.DSLReports), bbresult.Fixed(g.DSLReportsAddedMs, 1), rpm, FormulaDSLReports)
	fmt.Fprintf(ew, "Grade %-2s (p95)        %6s ms\n  = %s\n", orDash(g.Percentile), bbresult.Fixed(g.PercentileAddedMs, 1), FormulaPercentile)
	fmt.Fprintf(ew, "Letters: %s.\nBoth grades use %s.\n", gradeScale, basis(g.Basis))
	if r.RPM != nil {
		fmt.Fprintf(ew, "RPM %.0f: responsiveness against %s (%.1f down, %.1f up Mbit/s)\n", r.RPM.RPM, r.RPM.URL, r.RPM.DownloadMbps, r.RPM.UploadMbps)
	}
	pathLine(ew, r)
	cpuLines(ew, r)
	for _, n := range r.Notes {
		writeNote(ew, n)
	}
	return ew.err
}

// writeNote writes "Note: text" word-wrapped to 80 columns, continuation
// lines indented under the text; a word longer than that (a URL) stands
// alone on its line.
func writeNote(w io.Writer, text string) {
	const width, indent = 80, "      "
	line := "Note:"
	for _, word := range strings.Fields(text) {
		if n := utf8.RuneCountInString(line); n > len(indent) && n+1+utf8.RuneCountInString(word) > width {
			fmt.Fprintln(w, line)
			line = indent + word
			continue
		}
		line += " " + word
	}
	fmt.Fprintln(w, line)
}

func header(w io.Writer, r *bbresult.Result) {
	fmt.Fprintf(w, "%s → %s (%s, %s)\n%s, ", r.Tool, r.Server, r.ServerAddr, bbresult.FamilyName(r.Family),
		r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "%d streams/direction, probes every %g ms, idle RTT %s ms\n",
		r.Streams, r.ProbeInterval, IdleRTT(r.IdleRTT))
}

// basis explains the latency series the grades use; fq_codel and CAKE give
// sparse flows priority, so UDP probes look better than the bulk flows feel.
// IdleRTT formats an idle RTT with enough digits that a LAN or loopback
// path (tens of microseconds) does not read as "0.0".
func IdleRTT(ms float64) string {
	if ms < 10 {
		return bbresult.Fixed(ms, 2)
	}
	return bbresult.Fixed(ms, 1)
}

func basis(b string) string {
	switch b {
	case bbresult.BasisProbes:
		return "the UDP probes: sparse flows, which fq_codel and CAKE\nprioritise; the in-flow column shows what the bulk flows see"
	case bbresult.BasisHandshakes:
		return "the TCP handshakes: sparse flows, which fq_codel and CAKE\nprioritise; the in-flow column shows what the bulk flows see"
	case "":
		return "an unrecorded latency series"
	}
	return b
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return bbresult.Fixed(v, 1)
}

// stat prints v unless s holds no samples, where 0 would read as a measurement.
func stat(s bbresult.Stats, v float64) string {
	if s.N == 0 {
		return "-"
	}
	return num(v)
}

// added is blank for idle phases: they are the baseline, not a comparison.
func added(p bbresult.Phase, v float64) string {
	if isIdle(p.Name) {
		return "-"
	}
	return num(v)
}

func isIdle(name string) bool {
	return name == bbresult.PhaseIdleBefore || name == bbresult.PhaseIdleAfter
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*float64(n)/float64(of))
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error so the formatting code can stay
// a straight list of Fprintf calls.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// pathLine says, for a test run on the router, which queue its route took
// and whether the shaper counted what the test moved (the disagreements
// are notes).
func pathLine(w io.Writer, r *bbresult.Result) {
	if r.Queue == "" {
		return
	}
	agree := 0
	for _, c := range r.PathChecks {
		if c.Verdict == "agrees" {
			agree++
		}
	}
	switch {
	case len(r.PathChecks) == 0:
		fmt.Fprintf(w, "Route: through queue %s.\n", r.Queue)
	case agree == len(r.PathChecks):
		fmt.Fprintf(w, "Route: through queue %s; its shaper counted what the test moved in every loaded phase.\n", r.Queue)
	default:
		fmt.Fprintf(w, "Route: through queue %s; its shaper's counters disagree with the goodput in %d of %d loaded directions (notes).\n", r.Queue, len(r.PathChecks)-agree, len(r.PathChecks))
	}
}

// cpuLines: what each loaded phase cost the router's CPU, and the rate its
// busiest core implies it can shape (cpuload.Costs).
func cpuLines(w io.Writer, r *bbresult.Result) {
	if len(r.CPU) == 0 {
		return
	}
	width := 0
	for _, c := range r.CPU {
		width = max(width, len(c.Phase))
	}
	fmt.Fprintf(w, "Router CPU (%d cores; the test's own process left out) per loaded phase, and\nthe rate at which its busiest core (or all) would be full, in Mbit/s:\n", r.CPU[0].CPUs)
	var bound *bbresult.PhaseCPU
	for i, c := range r.CPU {
		fmt.Fprintf(w, "  %-*s %6.1f Mbit/s %5.1f ms/Mbit  cpu%d %3.0f%% (%.0f%% softirq)  max ~%.0f\n",
			width, c.Phase, c.ShapedMbps, c.MsPerMbit, c.Busiest, 100*c.BusiestShare, 100*c.BusiestSoftirq, c.CeilingMbps)
		if c.Bound && (bound == nil || c.ShapedMbps < bound.ShapedMbps) {
			bound = &r.CPU[i]
		}
	}
	if bound != nil {
		fmt.Fprintf(w, "  CPU-bound at %.0f Mbit/s (%s): cpu%d was saturated.\n", bound.ShapedMbps, bound.Phase, bound.Busiest)
		if bound.SelfCores >= 0.25 {
			fmt.Fprintf(w, "  This test took %.0f%% of a core itself: the router shapes more when it runs elsewhere.\n", 100*bound.SelfCores)
		}
	}
}
