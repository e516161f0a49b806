package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

const reportUsage = "  report RESULTS-DIR [--results FILE]  the tables of a finished run again (and into FILE, docs/results.md)\n"

// runReport prints a finished run's tables again, optionally into docs/results.md.
func runReport(_ string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab report", flag.ExitOnError)
	results := fs.String("results", "", "rewrite the tables of this `FILE` (docs/results.md)")
	// flags may follow the directory, as the usage shows
	var pos []string
	for rest := args; ; {
		fs.Parse(rest)
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		fatal(fmt.Errorf("usage: sqmkit-lab report RESULTS-DIR [--results FILE]"))
	}
	var rs []result
	b, err := os.ReadFile(filepath.Join(pos[0], "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &rs)
	}
	if err != nil {
		fatal(err)
	}
	printTable(os.Stdout, rs)
	if *results != "" {
		if err := updateResults(*results, cmp.Or(seriesOf(runKernel(rs)), hostSeries), rs); err != nil {
			fatal(err)
		}
	}
	return exitStatus(rs)
}

// runKernel is the guest kernel a run's results name.
func runKernel(rs []result) string {
	for _, r := range rs {
		if r.Kernel != "" {
			return r.Kernel
		}
	}
	return ""
}
