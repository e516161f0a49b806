package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/doctor"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// maxWatch bounds doctor --watch: a day of counters is already more than a
// judgement needs.
const maxWatch = 24 * time.Hour

func init() {
	register(command{
		name:    "doctor",
		summary: "check from the kernel's counters that the shaper is really on the path; read-only (exit 0 healthy, 1 findings, 2 could not inspect)",
		run:     runDoctor,
	})
}

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", "[IFACE...]")
	fs.SetOutput(stderr)
	var o doctor.Options
	fs.StringVar(&o.Root, "root", "", "read /etc and /sys under `DIR` (default / live; nothing when judging pasted output)")
	fs.StringVar(&o.File, "config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	watch := fs.Float64("watch", 0, "sample the counters twice, `SECONDS` apart, and judge rates and bypass over that window")
	fs.StringVar(&o.Stats, "tc-stats", "", "judge pasted 'tc -s qdisc show' output from `FILE` (text or tc -j JSON) instead of the live system")
	fs.StringVar(&o.Classes, "tc-class", "", "with --tc-stats: pasted 'tc -s class show dev IFACE' output `FILE`")
	o.Overrides = config.RegisterFlags(fs)
	fs.StringVar(&o.Filters, "tc-filter", "", "with --tc-stats: pasted 'tc -s filter show dev IFACE parent ffff:' output `FILE`")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	// a window the counters can be read over: longer overflows a
	// time.Duration and read as "-9.22e+09" (TestDoctorWatchRange)
	if *watch < 0 || *watch > maxWatch.Seconds() || math.IsNaN(*watch) {
		fmt.Fprintf(stderr, "sqmkit doctor: --watch %s: want 0 (one reading) to %.0f seconds\n", strconv.FormatFloat(*watch, 'f', -1, 64), maxWatch.Seconds())
		return 2
	}
	o.Args, o.Watch = fs.Args(), time.Duration(*watch*float64(time.Second))
	o.Read, o.RateDir = (&tc.Runner{}).Read, filepath.Join(cmp.Or(o.Root, "/"), ratestate.DefaultDir)
	o.Warn = func(s string) { fmt.Fprintln(stderr, "sqmkit doctor:", s) }
	r, err := doctor.Run(o)
	if err == nil && *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else if err == nil {
		err = r.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit doctor: %v\n", err)
		return 2
	}
	if r.Status == doctor.OK {
		return 0
	}
	return 1
}
