package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

const reportUsage = "  report RESULTS-DIR... [--results FILE]  the tables of finished runs of one kernel again (and into FILE, docs/results.md)\n"

// runReport prints finished runs' tables again, optionally into
// docs/results.md: several runs of one kernel (a profile each) make one
// kernel's section.
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
	if len(pos) == 0 {
		fatal(fmt.Errorf("usage: sqmkit-lab report RESULTS-DIR... [--results FILE]"))
	}
	rs, series, err := readRuns(pos)
	if err != nil {
		fatal(err)
	}
	printTable(os.Stdout, rs)
	if *results != "" {
		if err := updateResults(*results, series, rs); err != nil {
			fatal(err)
		}
	}
	return exitStatus(rs)
}

// readRuns reads the results of runs on one kernel series; runs of two
// series would put one kernel's figures under another's heading
// (TestReadRuns).
func readRuns(dirs []string) (rs []result, series string, err error) {
	first := ""
	for _, dir := range dirs {
		var run []result
		b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err == nil {
			err = json.Unmarshal(b, &run)
		}
		if err != nil {
			return nil, "", err
		}
		s := cmp.Or(seriesOf(runKernel(run)), hostSeries)
		if series == "" {
			series, first = s, dir
		} else if s != series {
			return nil, "", fmt.Errorf("%s ran on kernel %s and %s on %s: report one kernel's runs at a time", first, series, dir, s)
		}
		rs = append(rs, run...)
	}
	return rs, series, nil
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
