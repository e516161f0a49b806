package main

import (
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

func init() {
	for _, c := range []struct{ name, summary string }{
		{"start", "shape the queues: probe tc support, then apply egress and ingress (one tc batch each)"},
		{"stop", "remove the queues' qdiscs and IFB; safe to run twice or when never started"},
		{"restart", "stop, then start"},
		{"reload", "apply a changed config: shape the enabled queues as configured (changing only what differs), remove sqmkit's trees from disabled ones"},
		{"status", "show the qdiscs on each queue's device and IFB next to the plan; exit 1 if they differ"},
	} {
		name := c.name
		register(command{name: name, summary: c.summary, run: func(args []string, stdout, stderr io.Writer) int {
			return runLifecycle(name, args, stdout, stderr)
		}})
	}
}

func runLifecycle(name string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name, "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	cache := fs.String("probe-cache", tc.DefaultCacheDir, "`DIR` remembering the tc batches this boot accepted (\"\" probes every time)")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long to wait while another sqmkit changes the same interface")
	verbose := fs.Bool("v", false, "debug: log every tc/ip batch")
	var dry, hotplug, all *bool
	if name != "status" {
		dry = fs.Bool("dry-run", false, "print the batches that would run and touch nothing")
	}
	switch name {
	case "start", "restart":
		hotplug = fs.Bool("hotplug", false, "started by an interface event (also when ACTION=ifup/ifupdate): compare with the live tree and change only what differs")
	case "stop":
		hotplug = fs.Bool("hotplug", false, "an ifdown event (also when ACTION=ifdown): stop only queues whose device is gone or down")
		all = fs.Bool("all", false, "every queue section, enabled or not (the service's stop)")
	}
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "sqmkit %s: one SECTION or IFACE at most, got %q\n", name, fs.Args())
		return 2
	}
	var qs, retired []config.Queue
	var err error
	switch {
	case all != nil && *all:
		qs, err = config.All(*root, *file, o)
	case name == "reload":
		if qs, err = config.Resolve(*root, *file, o, ""); errors.Is(err, config.ErrNoneEnabled) {
			qs, err = nil, nil
		}
		var every []config.Queue
		if err == nil {
			every, err = config.All(*root, *file, o)
		}
		retired = config.Retired(every, qs)
	default:
		qs, err = config.Resolve(*root, *file, o, fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit %s: %v\n", name, err)
		return 1
	}
	opts := systemOptions(*root, *cache, *lockWait, *verbose, stderr)
	if hotplug != nil {
		action := os.Getenv("ACTION")
		opts.Hotplug = *hotplug || name != "stop" && (action == "ifup" || action == "ifupdate") || name == "stop" && action == "ifdown"
	}
	if dry != nil && *dry {
		opts.DryRun = stdout
	}
	// Rates set by sqmkit rate (tune, autorate) hold until a full start:
	// status and the hotplug and reload paths plan with them.
	kept := ""
	if name == "status" || name == "reload" || opts.Hotplug && name != "stop" {
		kept = opts.RateDir
	}
	ts, err := targets(*root, qs, kept)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit %s: %v\n", name, err)
		return 1
	}

	code := 0
	switch name {
	case "status":
		for _, s := range apply.Inspect(ts, opts) {
			if !printStatus(stdout, s) {
				code = 1
			}
		}
		return code
	case "reload":
		// reconcile what is enabled, remove what was disabled
		opts.Hotplug = true
		gone, err := targets(*root, retired, "")
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit %s: %v\n", name, err)
			return 1
		}
		stopOpts := opts
		stopOpts.Hotplug = false
		for _, res := range apply.Stop(gone, stopOpts) {
			if printResult(stdout, res) {
				code = 1
			}
		}
	case "stop", "restart":
		for _, res := range apply.Stop(ts, opts) {
			if printResult(stdout, res) {
				code = 1
			}
		}
		if name == "stop" {
			return code
		}
	}
	for _, res := range apply.Start(ts, opts) {
		if printResult(stdout, res) {
			code = 1
		}
	}
	return code
}

// systemOptions are the options of a command acting on the running kernel.
func systemOptions(root, cache string, lockWait time.Duration, verbose bool, stderr io.Writer) apply.Options {
	logf := newLog(root, stderr)
	r := &tc.Runner{}
	if verbose {
		r.Debug = logf
	}
	return apply.Options{Kernel: apply.System{Runner: r}, Prober: &tc.Prober{Runner: r, CacheDir: cache, Log: logf}, Log: logf,
		Locks: &apply.Locks{Dir: apply.DefaultLockDir, Wait: lockWait}, RateDir: ratestate.DefaultDir}
}

// targets reads the device facts of each queue and, from keptDir (""
// for none), the rates sqmkit rate set since the last start.
func targets(root string, qs []config.Queue, keptDir string) ([]apply.Target, error) {
	var ts []apply.Target
	for _, q := range qs {
		f, err := linkinfo.Read(root, q.Interface)
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", q.Section, err)
		}
		if _, err := ratestate.Apply(keptDir, &q); err != nil {
			return nil, err
		}
		ts = append(ts, apply.Target{Queue: q, Facts: f})
	}
	return ts, nil
}

// newLog sends decisions to syslog on OpenWrt (what `logger -t sqmkit`
// does, without a process per line) and to stderr elsewhere. The socket is
// the one under root, like every other file: logd listens on /dev/log.
func newLog(root string, stderr io.Writer) func(string) {
	if _, err := os.Stat(filepath.Join(root, "etc/openwrt_release")); err == nil {
		if w, err := syslog.Dial("unixgram", filepath.Join(root, "dev/log"), syslog.LOG_INFO|syslog.LOG_DAEMON, "sqmkit"); err == nil {
			return func(s string) { w.Info(s) }
		}
	}
	return func(s string) { fmt.Fprintln(stderr, "sqmkit:", s) }
}

// printResult prints one queue's outcome and says whether it failed. Each
// line says what the kernel holds, read back after a failure, never what
// was merely attempted.
func printResult(w io.Writer, r apply.Result) bool {
	if r.State == apply.DryRun {
		return false
	}
	line := fmt.Sprintf("%s (section %s): %s", r.Device, r.Section, r.State)
	if r.Err != nil {
		line += ": " + r.Err.Error()
	} else if r.State == apply.Stopped {
		line += ": " + removed(r.Done)
	}
	fmt.Fprintln(w, line)
	for _, d := range r.Dirs {
		status := "shaped"
		switch {
		case d.Kept:
			status = "already as planned, left alone"
		case d.NotStarted:
			status = "not started (left as it was): " + d.Err.Error()
		case d.Err != nil && len(d.Left) == 0:
			status = "FAILED, no qdisc left: " + d.Err.Error()
		case d.Err != nil:
			status = "FAILED, and its rollback left " + strings.Join(d.Left, "; ") + ": " + d.Err.Error()
		}
		fmt.Fprintf(w, "  %-7s on %s: %s\n", d.Direction, d.Device, status)
		for _, warn := range d.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
	}
	return r.Failed()
}

func removed(done []string) string {
	if len(done) == 0 {
		return "nothing of sqmkit's was there"
	}
	return "removed " + strings.Join(done, ", ")
}

// printStatus prints the kernel's qdiscs, classes and filters for one queue
// and every difference from the plan.
func printStatus(w io.Writer, s apply.Status) bool {
	if s.Err != nil {
		fmt.Fprintf(w, "section %s: %v\n", s.Section, s.Err)
		return false
	}
	verdict := "shaped as planned"
	if !s.Matches() {
		verdict = "differs from the plan"
	}
	fmt.Fprintf(w, "%s (section %s, %s): %s\n", s.Plan.Device, s.Section, s.Plan.Backend, verdict)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, dev := range s.Devices {
		for _, r := range s.Live.Of(dev) {
			switch {
			case r.Type == "filter" && len(r.Actions) == 0:
				// u32 hash-table headers: the rule below them says it all
			case r.Type == "filter":
				fmt.Fprintf(tw, "  %s\tfilter %s\t%s\t%s\t%d pkts\t\n", dev, r.Kind, r.Parent, actions(r), r.Actions[0].Stats.Packets)
			case r.Type == "class" && !tcstats.Classful(r.Kind), r.Type == "qdisc" && r.IsDefault():
			default:
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d bytes\t%d pkts\t%d dropped\n", dev, r.ID(), r.Parent, r.Stats.Bytes, r.Stats.Packets, r.Stats.Dropped)
			}
		}
	}
	tw.Flush()
	for _, d := range s.Diffs {
		fmt.Fprintf(w, "  %s %s\n", d.Direction, d)
	}
	return s.Matches()
}

func actions(r *tcstats.Record) string {
	var out []string
	for _, a := range r.Actions {
		s := a.Kind
		if a.Redirect != "" {
			s += " -> " + a.Redirect
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
