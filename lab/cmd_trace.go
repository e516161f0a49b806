package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	traceUsage = `  trace  --trace NAME|PATH [--profile cable] [--controllers none,static-min,static-mean,sqmkit,sqmkit-reflectors,ext:NAME=DIR]
         replay a capacity trace (lab/traces) on the modem with each controller under a bidirectional load:
         utilisation, added delay per direction, CPU and processes of the controller
`
	tracesUsage = "  traces write lab/traces/*.trace from their generator and seeds (lab/internal/trace)\n"
)

func runTrace(repo string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab trace", flag.ExitOnError)
	prof := fs.String("profile", "cable", "profile whose framing and buffer the trace runs on (its rates become the trace's)")
	tr := fs.String("trace", "", "trace name (lab/traces/NAME.trace) or path")
	ctls := fs.String("controllers", strings.Join(traceControllers, ","), "comma-separated: "+strings.Join(traceControllers, ", ")+", "+ctlSqmkitMQ+" (cake_mq), ext:NAME=DIR (an external controller: DIR/start launches it, DIR/stop ends it; lab/README.md)")
	out := fs.String("out", "", "results directory (default lab/results/<time>-trace-<name>)")
	kernel := kernelFlag(fs)
	fs.Parse(args)
	if *tr == "" {
		fatal(fmt.Errorf("--trace: name one of lab/traces (lte, starlink, cable-evening, steady) or a file"))
	}
	path := *tr
	if !strings.ContainsRune(path, '/') {
		path = filepath.Join(repo, "lab/traces", path+".trace")
	}
	if _, err := os.Stat(path); err != nil {
		fatal(fmt.Errorf("--trace: %w", err))
	}
	cs := strings.Split(*ctls, ",")
	for _, c := range cs {
		if !knownController(c) && !strings.HasPrefix(c, extPrefix) {
			fatal(fmt.Errorf("--controllers: %q: want %s, %s or ext:NAME=DIR", c, strings.Join(traceControllers, ", "), ctlSqmkitMQ))
		}
		if strings.HasPrefix(c, extPrefix) {
			if _, err := parseBackend(c); err != nil {
				fatal(fmt.Errorf("--controllers: %w", err))
			}
		}
	}
	abs, _ := filepath.Abs(path)
	plan := []planRun{{Profile: *prof, Backends: cs, Mode: "trace", Trace: abs}}
	return execute(repo, "trace", "trace-"+strings.TrimSuffix(filepath.Base(path), ".trace"), *out, *kernel, plan, false)
}

func runTraces(repo string, _ []string) int {
	if err := writeTraces(filepath.Join(repo, "lab/traces")); err != nil {
		fatal(err)
	}
	return 0
}
