package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// printTable prints profile × backend with the grade, median/p95 added
// latency per load phase and download goodput.
func printTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nprofile\tbackend\tstatus\tgrade\tdownload +med/+p95 ms\tupload +med/+p95 ms\tbidir +med/+p95 ms\tgoodput down/up Mbit/s\ttool")
	for _, r := range rs {
		cells := []string{r.Profile, r.Backend, r.Status, "-", "-", "-", "-", "-", "-"}
		if m := r.Test; m != nil {
			cells[3] = m.Grade
			for i, name := range accept.LoadPhases {
				if p := m.Phase(name); p != nil {
					cells[4+i] = fmt.Sprintf("%.1f / %.1f", p.AddedMedian, p.AddedP95)
				}
			}
			if d, u := m.Phase(accept.Download), m.Phase(accept.Upload); d != nil && u != nil {
				cells[7] = fmt.Sprintf("%.1f / %.1f", d.DownMbps, u.UpMbps)
			}
			cells[8] = m.Tool
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(w, "%s/%s: error: %s (logs in %s)\n", r.Profile, r.Backend, r.Error, r.Dir)
		}
		for _, c := range r.Checks {
			if !c.OK {
				fmt.Fprintf(w, "%s/%s: %s\n", r.Profile, r.Backend, c)
			}
		}
		if r.FirstTry != nil {
			fmt.Fprintf(w, "%s/%s: graded twice; the first try missed %s (evidence in first_try of result.json)\n", r.Profile, r.Backend, failedNames(r.FirstTry.Checks))
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
				fmt.Printf("  %s +%.0f ms", name, p.AddedMedian)
			}
		}
		if r.Test.Plot != "" {
			fmt.Printf("\n            plot: %s", r.Test.Plot)
		}
		fmt.Println()
	}
}
