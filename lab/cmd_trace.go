package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/trace"
)

const (
	traceUsage = `  trace  --trace NAME|PATH|A.down,A.up|DIR [--seconds N] [--slot 10ms] [--profile cable] [--controllers none,static-min,static-mean,sqmkit,sqmkit-reflectors,tune,ext:NAME=DIR]
         replay a capacity trace on the modem with each controller under a bidirectional load: a generated one
         (lab/traces), a recording in mahimahi's format (A.down,A.up), or every recording in DIR (NAME.down beside
         NAME.up); utilisation, bytes moved, added delay per direction, CPU and processes of the controller
`
	tracesUsage = "  traces write lab/traces/*.trace from their generator and seeds (lab/internal/trace)\n"
)

func runTrace(repo string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab trace", flag.ExitOnError)
	prof := fs.String("profile", "cable", "profile whose framing and buffer the trace runs on (its rates become the trace's)")
	tr := fs.String("trace", "", "trace name (lab/traces/NAME.trace), a file, a recording's pair A.down,A.up, or a directory of recordings")
	seconds := fs.Int("seconds", 0, "replay only each trace's first `N` seconds (0: all of it)")
	slot := fs.Duration("slot", recordedSlot, "a recording's slot on the modem: how often its tbf and plug change (whole ms)")
	ctls := fs.String("controllers", strings.Join(traceControllers, ","), "comma-separated: "+strings.Join(traceControllers, ", ")+", "+ctlSqmkitMQ+" (cake_mq), "+ctlTune+" (sqmkit tune while it replays), ext:NAME=DIR (an external controller: DIR/start launches it, DIR/stop ends it; lab/README.md)")
	out := fs.String("out", "", "results directory (default lab/results/<time>-trace-<name>)")
	kernel := kernelFlag(fs)
	fs.Parse(args)
	paths, err := tracePaths(repo, *tr)
	if err != nil {
		fatal(fmt.Errorf("--trace: %w", err))
	}
	if *slot < time.Millisecond || *slot%time.Millisecond != 0 {
		fatal(fmt.Errorf("--slot %v: want whole milliseconds", *slot))
	}
	cs := strings.Split(*ctls, ",")
	for _, c := range cs {
		if !knownController(c) && !strings.HasPrefix(c, extPrefix) {
			fatal(fmt.Errorf("--controllers: %q: want %s, %s, %s or ext:NAME=DIR", c, strings.Join(traceControllers, ", "), ctlSqmkitMQ, ctlTune))
		}
		if strings.HasPrefix(c, extPrefix) {
			if _, err := parseBackend(c); err != nil {
				fatal(fmt.Errorf("--controllers: %w", err))
			}
		}
	}
	var plan []planRun
	for _, p := range paths {
		plan = append(plan, planRun{Profile: *prof, Backends: cs, Mode: "trace", Trace: p, Seconds: *seconds, SlotMs: int(*slot / time.Millisecond)})
	}
	name := strings.TrimSuffix(filepath.Base(strings.Split(*tr, ",")[0]), ".down")
	return execute(repo, "trace", "trace-"+strings.TrimSuffix(name, ".trace"), *out, *kernel, plan, false)
}

// tracePaths are the traces --trace names, absolute: a generated trace's
// name or file, a recording's pair, or every pair in a directory.
func tracePaths(repo, arg string) ([]string, error) {
	switch {
	case arg == "":
		return nil, fmt.Errorf("name one of lab/traces (lte, starlink, cable-evening, steady), a file, A.down,A.up or a directory of recordings")
	case strings.Contains(arg, ","):
		var abs []string
		for _, f := range strings.Split(arg, ",") {
			a, err := filepath.Abs(f)
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(a); err != nil {
				return nil, err
			}
			abs = append(abs, a)
		}
		if len(abs) != 2 {
			return nil, fmt.Errorf("%q: a recording is two files, A.down,A.up", arg)
		}
		return []string{strings.Join(abs, ",")}, nil
	case !strings.ContainsRune(arg, '/'):
		arg = filepath.Join(repo, "lab/traces", arg+".trace")
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return trace.Pairs(abs)
	}
	return []string{abs}, nil
}

func runTraces(repo string, _ []string) int {
	if err := writeTraces(filepath.Join(repo, "lab/traces")); err != nil {
		fatal(err)
	}
	return 0
}
