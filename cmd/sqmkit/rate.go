package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc"
)

func init() {
	register(command{name: "rate", summary: "change a running queue's shaper rates in place (tc change, no teardown); kept until the next start or stop", run: runRate})
}

func runRate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rate", "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	down := fs.Int("download", 0, "new download (ingress) rate in `KBIT`/s; 0 keeps the running one")
	up := fs.Int("upload", 0, "new upload (egress) rate in `KBIT`/s; 0 keeps the running one")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long to wait while another sqmkit changes the same interface")
	dry := fs.Bool("dry-run", false, "print the batch that would run and touch nothing")
	verbose := fs.Bool("v", false, "debug: log every tc batch")
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() > 1:
		fmt.Fprintf(stderr, "sqmkit rate: one SECTION or IFACE at most, got %q\n", fs.Args())
		return 2
	case *down == 0 && *up == 0:
		fmt.Fprintln(stderr, "sqmkit rate: nothing to change; give --download KBIT and/or --upload KBIT")
		return 2
	}
	qs, err := config.Resolve(*root, *file, o, fs.Arg(0))
	if err == nil && len(qs) > 1 {
		err = fmt.Errorf("%d queues are enabled (%s and %s, ...); name the one whose rates to change", len(qs), qs[0].Section, qs[1].Section)
	}
	var ts []apply.Target
	if err == nil {
		ts, err = apply.Targets(*root, qs, "")
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit rate: %v\n", err)
		return 1
	}
	opts := systemOptions(*root, tc.DefaultCacheDir, *lockWait, *verbose, stderr)
	if *dry {
		opts.DryRun = stdout
	}
	r := apply.Rate(ts[0], config.Rates{Download: *down, Upload: *up}, "sqmkit rate", opts)
	if r.State == apply.DryRun {
		return 0
	}
	line := fmt.Sprintf("%s (section %s): %s", r.Device, r.Section, r.State)
	if r.Err != nil {
		line += ": " + r.Err.Error()
	}
	fmt.Fprintln(stdout, line)
	if r.State == apply.Changed {
		for _, d := range r.Plan.Dirs {
			fmt.Fprintf(stdout, "  %-7s on %s: %d kbit/s\n", d.Direction.Side(), d.Device, d.RateKbit)
		}
	}
	if r.State == apply.Failed {
		return 1
	}
	return 0
}

// ratePair parses a flag's DOWN:UP, both positive kbit/s (autorate's
// --min/--max, tune's --line); example goes into the error.
func ratePair(flag, v, example string) (config.Rates, error) {
	d, u, ok := strings.Cut(v, ":")
	down, err1 := strconv.Atoi(d)
	up, err2 := strconv.Atoi(u)
	if !ok || err1 != nil || err2 != nil || down <= 0 || up <= 0 {
		return config.Rates{}, fmt.Errorf("%s %q: want DOWN:UP in kbit/s, e.g. %s", flag, v, example)
	}
	return config.Rates{Download: down, Upload: up}, nil
}
