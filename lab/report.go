package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// row is one scenario in the side-by-side tables: the cells in column
// order (tableHead).
func row(r result) []string {
	cells := []string{r.Backend, shownStatus(r), "-", "-", "-", "-", "-", "-", "-", "-"}
	if m := r.Test; m != nil {
		cells[2] = m.Grade
		busy := make([]string, len(accept.LoadPhases))
		for i, name := range accept.LoadPhases {
			busy[i] = "-"
			if p := m.Phase(name); p != nil {
				cells[3+i] = bbresult.Fixed(p.AddedMedian, 1) + " / " + bbresult.Fixed(p.AddedP95, 1)
				if p.Noise != nil && p.Noise.Busy > 0 {
					busy[i] = fmt.Sprintf("%.0f", 100*p.Noise.Busy)
				}
			}
		}
		if slices.ContainsFunc(busy, func(s string) bool { return s != "-" }) {
			cells[9] = strings.Join(busy, " / ")
		}
		if d, u := m.Phase(accept.Download), m.Phase(accept.Upload); d != nil && u != nil {
			cells[6] = fmt.Sprintf("%.1f / %.1f", d.DownMbps, u.UpMbps)
		}
	}
	if s := r.Start; s != nil {
		cells[7] = fmt.Sprintf("%.0f / %.0f", s.First.WallMs, s.Warm.WallMs)
		if s.Warm.Processes >= 0 {
			cells[8] = fmt.Sprintf("%d / %d", s.Warm.Processes, s.Warm.Execs)
		}
	}
	return cells
}

// shownStatus is the verdict as a reader takes it: the unshaped link's
// "pass" is the lab's expectation met (the link is bloated), not the link's
// grade.
func shownStatus(r result) string {
	if r.Backend == unshaped && r.Status == "pass" {
		return "bloated, as expected"
	}
	return r.Status
}

var tableHead = []string{"backend", "status", "grade", "download +med/+p95 ms", "upload +med/+p95 ms",
	"bidir +med/+p95 ms", "goodput down/up Mbit/s", "start first/warm ms", "processes / execs (warm)", "guest vCPUs busy % down/up/bidir"}

// byProfile groups results per profile, in first-seen order.
func byProfile(rs []result) (names []string, groups map[string][]result) {
	groups = map[string][]result{}
	for _, r := range rs {
		if !slices.Contains(names, r.Profile) {
			names = append(names, r.Profile)
		}
		groups[r.Profile] = append(groups[r.Profile], r)
	}
	return names, groups
}

// printTable prints one side-by-side table per profile, then what went
// wrong and what was recorded beside the grades.
func printTable(w io.Writer, rs []result) {
	names, groups := byProfile(rs)
	for _, name := range names {
		fmt.Fprintf(w, "\n%s\n", name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(tableHead, "\t"))
		for _, r := range groups[name] {
			fmt.Fprintln(tw, strings.Join(row(r), "\t"))
		}
		tw.Flush()
	}
	for _, r := range rs {
		if t := r.Tune; t != nil {
			fmt.Fprintf(w, "%s/%s: %s\n", r.Profile, r.Backend, tuneLine(t))
		}
		if sw := r.Sweep; sw != nil {
			fmt.Fprintf(w, "%s/%s: %s\n", r.Profile, r.Backend, sweepLine(sw))
		}
		if c := r.Cost; c != nil && strings.HasPrefix(r.Backend, "cake") {
			fmt.Fprintf(w, "%s/%s: %s\n", r.Profile, r.Backend, costLine(c))
		}
		if x := r.Trace; x != nil {
			fmt.Fprintf(w, "%s\n", traceLine(x))
		}
		if x := r.TraceTune; x != nil {
			fmt.Fprintf(w, "trace %s\n", traceTuneLine(x))
		}
		if x := r.AB; x != nil {
			for _, s := range x.Stats {
				fmt.Fprintf(w, "%s/%s at %d/%d: ab: %s\n", r.Profile, r.Backend, x.Spec.Down, x.Spec.Up, abLine(s, x.Spec.Arms[0]))
			}
		}
		if r.Error != "" {
			msg := r.Status + ": " + r.Error
			if strings.HasPrefix(r.Error, r.Status+":") { // an inconclusive error names itself
				msg = r.Error
			}
			fmt.Fprintf(w, "%s/%s: %s (logs in %s)\n", r.Profile, r.Backend, msg, r.Dir)
		}
		if r.FirstTry != "" {
			fmt.Fprintf(w, "%s/%s: second pass; the first was %s (its files in %s)\n", r.Profile, r.Backend, r.FirstTry, r.Dir+busySuffix)
		}
		for _, c := range r.Checks {
			if !c.OK {
				fmt.Fprintf(w, "%s/%s: %s\n", r.Profile, r.Backend, c)
			}
		}
		for _, d := range r.Discarded {
			fmt.Fprintf(w, "%s/%s: %s phase of run %s discarded: %s\n", r.Profile, r.Backend, d.Phase, d.Run, d.Why)
		}
		if r.Limitation != "" && r.Status == "limitation" {
			fmt.Fprintf(w, "%s/%s: expected limitation: %s\n", r.Profile, r.Backend, r.Limitation)
		}
		for _, c := range r.CrossChecks {
			if !c.OK {
				// informational: a bloated phase is not stationary between two runs
				fmt.Fprintf(w, "%s/%s: cross-check differs (recorded, not graded): %s = %.1f vs %s\n", r.Profile, r.Backend, c.Name, c.Got, c.Want)
			}
		}
	}
}

// tuneLine says what tune chose against the line and the 95 % rule.
func tuneLine(t *tuned) string {
	s := fmt.Sprintf("tune%s: download %d (%.0f%% of line %d; 95%% rule %d) upload %d (%.0f%% of %d; rule %d), test time %.0f s",
		map[bool]string{true: " over IPv6"}[t.IPv6], t.Down, pct(t.Down, t.LineDown), t.LineDown, t.Rule95Down, t.Up, pct(t.Up, t.LineUp), t.LineUp, t.Rule95Up, t.TestSeconds)
	if t.BoostDown > 0 || t.BoostUp > 0 {
		s += fmt.Sprintf("; boost seen %d/%d kbit/s goodput", t.BoostDown, t.BoostUp)
	}
	return s
}

// traceLine is one trace × controller's figures, download/upload.
func traceLine(x *traced) string {
	cpu := "-"
	if x.CPUPerHour >= 0 {
		cpu = fmt.Sprintf("%.1f s/h, %d processes", x.CPUPerHour, x.Processes)
	}
	return fmt.Sprintf("trace %s/%s: utilisation %.2f/%.2f, added p50 %.1f/%.1f p95 %.1f/%.1f p99 %.1f/%.1f ms, over 30 ms %.0f/%.0f s, %d rate changes, CPU %s",
		x.Trace, x.Controller, x.Utilisation[0], x.Utilisation[1], x.P50[0], x.P50[1], x.P95[0], x.P95[1], x.P99[0], x.P99[1], x.Over30s[0], x.Over30s[1], x.Changes, cpu)
}

// traceTable writes one trace's controllers as a table and says whether
// rs were a trace's (TestTraceTable): utilisation and goodput moved per
// direction, the added delay's median, p95 and p99, the seconds over
// +30 ms, and the controller's CPU.
func traceTable(b *strings.Builder, name string, rs []result) bool {
	if len(rs) == 0 || rs[0].Trace == nil {
		return false
	}
	x := rs[0].Trace
	fmt.Fprintf(b, "\n**%s** (%s; every controller between %d/%d and %d/%d kbit/s, from %d/%d)\n\n", name, x.Kind, x.Floor[0], x.Floor[1], x.Ceiling[0], x.Ceiling[1], x.Base[0], x.Base[1])
	fmt.Fprintln(b, "| controller | utilisation down/up | moved MB down+up | added down p50/p95/p99 ms | added up p50/p95/p99 ms | s over +30 ms down/up | CPU s/h |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|")
	for _, r := range rs {
		x := r.Trace
		if x == nil {
			what := r.Error
			if r.TraceTune != nil {
				what = traceTuneLine(r.TraceTune)
			}
			fmt.Fprintf(b, "| %s | %s: %s | | | | | |\n", r.Backend, r.Status, what)
			continue
		}
		cpu := "-"
		if x.CPUPerHour >= 0 {
			cpu = fmt.Sprintf("%.1f", x.CPUPerHour)
		}
		fmt.Fprintf(b, "| %s | %.2f / %.2f | %.1f + %.1f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.0f / %.0f | %s |\n", x.Controller, x.Utilisation[0], x.Utilisation[1],
			x.MovedMB[0], x.MovedMB[1], x.P50[0], x.P95[0], x.P99[0], x.P50[1], x.P95[1], x.P99[1], x.Over30s[0], x.Over30s[1], cpu)
	}
	return true
}

// sweepLine says what a sweep found.
func sweepLine(s *swept) string {
	stop := "every step"
	if s.Stop > 0 {
		stop = fmt.Sprintf("a direction ends after %d passing steps in a row", s.Stop)
	}
	return fmt.Sprintf("sweep %d-%d%% (%s): best A+ download %d, upload %d (one-way phases alone %d/%d; %d steps, %.0f s)", s.From, s.To, stop, s.BestDown, s.BestUp, s.OneWayDown, s.OneWayUp, s.Steps, s.WallSeconds)
}

// markdown renders the side-by-side tables for the README, headed by the
// run's date and commit.
func markdown(rs []result) string {
	var b strings.Builder
	if len(rs) > 0 {
		dates := distinct(rs, func(r result) string { return r.Date[:min(len(r.Date), 10)] })
		fmt.Fprintf(&b, "Lab %s of %s, commit %s, guest kernel %s (`sqmkit-lab`; start times in the emulated guest).\n",
			map[bool]string{true: "run", false: "runs"}[len(dates) < 2], strings.Join(dates, ", "),
			strings.Join(distinct(rs, func(r result) string { return r.Commit }), ", "),
			cmp.Or(strings.Join(distinct(rs, func(r result) string { return r.Kernel }), ", "), "not recorded"))
	}
	names, groups := byProfile(rs)
	for _, name := range names {
		if traceTable(&b, name, groups[name]) {
			continue
		}
		fmt.Fprintf(&b, "\n**%s**\n\n| %s |\n|%s\n", name, strings.Join(tableHead, " | "), strings.Repeat("---|", len(tableHead)))
		for _, r := range groups[name] {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row(r), " | "))
		}
		for _, r := range groups[name] {
			if r.Tune != nil {
				fmt.Fprintf(&b, "\n%s: %s\n", r.Backend, tuneLine(r.Tune))
			}
			if r.Cost != nil {
				fmt.Fprintf(&b, "\n%s: %s\n", r.Backend, costLine(r.Cost))
			}
			if r.Sweep != nil {
				fmt.Fprintf(&b, "\n%s: %s\n", r.Backend, sweepLine(r.Sweep))
			}

			if r.RPM != nil {
				fmt.Fprintf(&b, "\n%s: %s\n", r.Backend, rpmLine(r.RPM))
			}
		}
	}
	return b.String()
}

// rpmLine says what rpm mode measured beside its row's grade (the
// reference server's).
func rpmLine(x *rpmResult) string {
	own := "-"
	if x.Own != nil {
		own = x.Own.Grade
	}
	s := fmt.Sprintf("the row's grade is the reference responsiveness server's (sqmkit serve's on the same path: %s); RPM down/up goresponsiveness %.0f/%.0f on %d/%d connections, sqmkit %.0f/%.0f (aggregated as goresponsiveness does %.0f/%.0f)",
		own, x.Goresponsiveness[0], x.Goresponsiveness[1], x.GoresponsivenessConns[0], x.GoresponsivenessConns[1], x.Sqmkit[0], x.Sqmkit[1], x.SqmkitEarlier[0], x.SqmkitEarlier[1])
	if x.TuneServe != nil && x.TuneURL != nil {
		s += fmt.Sprintf("; tune %d/%d kbit/s against sqmkit serve, %d/%d against the reference server", x.TuneServe[0], x.TuneServe[1], x.TuneURL[0], x.TuneURL[1])
	}
	return s
}

// distinct is what f gives for rs, each value once, in first-seen order.
func distinct(rs []result, f func(result) string) []string {
	var out []string
	for _, r := range rs {
		if v := f(r); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Markers of a kernel series' generated part of docs/results.md.
func resultsMarkers(series string) (begin, end string) {
	return "<!-- lab-results:begin " + series + " (sqmkit-lab writes this part; edit lab/report.go) -->",
		"<!-- lab-results:end " + series + " -->"
}

// updateResults replaces the tables of kernel series between its markers,
// adding them at the end of the file when it has none.
func updateResults(path, series string, rs []result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	begin, end := resultsMarkers(series)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		s = strings.TrimRight(s, "\n") + "\n\n### Guest kernel " + series + "\n\n" + begin + "\n" + end + "\n"
		i, j = strings.Index(s, begin), strings.Index(s, end)
	}
	s = s[:i+len(begin)] + "\n" + markdown(rs) + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// printDemo shows the before/after pair the demo exists for.
func printDemo(rs []result) {
	fmt.Println("\ncable link, 4 streams each way — unshaped vs sqmkit cake:")
	for _, r := range rs {
		if r.Test == nil {
			continue
		}
		fmt.Printf("  %-9s grade %-3s", r.Backend, r.Test.Grade)
		for _, name := range accept.LoadPhases {
			if p := r.Test.Phase(name); p != nil {
				fmt.Printf("  %s %s ms", name, bbresult.Signed(p.AddedMedian, 0))
			}
		}
		if r.Test.Plot != "" {
			fmt.Printf("\n            plot: %s", r.Test.Plot)
		}
		fmt.Println()
	}
}
