package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/joblock"
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

// lifecycle holds the flags the lifecycle commands share.
type lifecycle struct {
	name, root, file string
	over             *config.Overrides
	byIface          bool
	opts             apply.Options
}

func runLifecycle(name string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name, "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	cache := fs.String("probe-cache", tc.DefaultCacheDir, "`DIR` remembering the tc batches this boot accepted (\"\" probes every time)")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long to wait while another sqmkit changes the same interface")
	verbose := fs.Bool("v", false, "debug: log every tc/ip batch")
	var dry, hotplug, all, byIface *bool
	if name != "status" {
		dry = fs.Bool("dry-run", false, "print the batches that would run and touch nothing")
	}
	switch name {
	case "start", "restart":
		hotplug = fs.Bool("hotplug", false, "started by an interface event (also when ACTION=ifup/ifupdate): compare with the live tree and change only what differs")
	case "stop":
		hotplug = fs.Bool("hotplug", false, "an ifdown event (also when ACTION=ifdown): stop only what sqmkit applied on devices that are gone or down")
		all = fs.Bool("all", false, "everything sqmkit applied, whatever the config says now (the service's stop; also what stop without an argument does)")
	}
	if name != "status" && name != "reload" {
		byIface = fs.Bool("by-interface", false, "the argument is the queue's interface, never a section name (sqm-scripts' convention: its .qos scripts run \"start --by-interface -- IFACE\")")
	}
	var o *config.Overrides
	if name == "stop" {
		o = config.RegisterFlags(fs, config.WhereFlags...) // rates and qdisc options change no stop: not shown
	} else {
		o = config.RegisterFlags(fs)
	}
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "sqmkit %s: one SECTION or IFACE at most, got %q\n", name, fs.Args())
		return 2
	}
	l := lifecycle{name: name, root: *root, file: *file, over: o, byIface: byIface != nil && *byIface,
		opts: systemOptions(*root, *cache, *lockWait, *verbose, stderr)}
	if hotplug != nil {
		action := os.Getenv("ACTION")
		l.opts.Hotplug = *hotplug || name != "stop" && (action == "ifup" || action == "ifupdate") || name == "stop" && action == "ifdown"
	}
	if dry != nil && *dry {
		l.opts.DryRun = stdout
	}
	switch name {
	case "stop":
		return l.stop(fs.Arg(0), all != nil && *all, stdout, stderr)
	case "reload":
		return l.reload(stdout, stderr)
	}
	qs, err := l.resolve(fs.Arg(0))
	if errors.Is(err, config.ErrNoneEnabled) && l.opts.Hotplug {
		// the service and interface events on a router with nothing enabled yet
		fmt.Fprintln(stdout, "no enabled queue: nothing to shape")
		return 0
	}
	// a section with a mistake is refused alone; the others go on
	code := badSections(name, err, stderr)
	if err != nil && code == 0 || len(qs) == 0 && code != 0 {
		if code == 0 {
			fmt.Fprintf(stderr, "sqmkit %s: %v\n", name, err)
		}
		return 1
	}
	// a tune that died left its trial rates: put back, and said
	for _, said := range apply.RecoverTrials(*root, qs, l.opts) {
		fmt.Fprintf(stderr, "sqmkit %s: %s\n", name, said)
	}
	if name != "status" && !l.opts.Hotplug {
		warnRates(name, qs, stderr)
	}
	// Rates set by sqmkit rate (tune, autorate) hold until a full start:
	// status and the hotplug and reload paths plan with them.
	kept := ""
	if name == "status" || l.opts.Hotplug {
		kept = l.opts.RateDir
	}
	ts, err := apply.Targets(*root, qs, kept)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit %s: %v\n", name, err)
		return 1
	}
	if name == "status" {
		for _, s := range apply.Inspect(ts, l.opts) {
			if !printStatus(stdout, s) {
				code = 1
			}
		}
		return code
	}
	if name == "restart" {
		code = max(code, printResults(stdout, apply.Stop(ts, l.opts)))
	}
	return max(code, printResults(stdout, apply.Start(ts, l.opts)))
}

// resolve selects the queues arg names, as a section or interface, or
// with --by-interface as the interface only (with the script sqm-scripts
// exports in SCRIPT).
func (l *lifecycle) resolve(arg string) ([]config.Queue, error) {
	if l.byIface && arg != "" {
		return config.ResolveInterface(l.root, l.file, l.over, arg, os.Getenv("SCRIPT"))
	}
	return config.Resolve(l.root, l.file, l.over, arg)
}

// stop removes what the records say sqmkit applied: all of it without an
// argument (or with --all, or on an ifdown event), else what was applied
// on the device (or section) arg names. A queue that names arg but has no
// record is stopped from its configuration, which removes only qdiscs
// sqmkit builds and deletes no device.
func (l *lifecycle) stop(arg string, all bool, stdout, stderr io.Writer) int {
	// a record that cannot be read is reported and skipped; the others
	// are stopped (TestStopSkipsBadRecord)
	recs, err := l.opts.Records.All()
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit stop: %v\n", err)
		code = 1
	}
	name := cmp.Or(arg, l.over.Interface())
	if l.byIface && l.opts.Hotplug && name != "" {
		if l.keepForRestart(name, stdout) {
			return 0
		}
		l.opts.Hotplug = false // no longer configured for sqmkit here: remove it, up or not
	}
	if !all && name != "" {
		recs = slices.DeleteFunc(recs, func(r applied.Record) bool {
			return r.Device != name && (l.byIface || r.Section != name)
		})
	}
	if len(recs) > 0 || all || name == "" || l.opts.Hotplug {
		if len(recs) == 0 && code == 0 {
			fmt.Fprintf(stdout, "nothing sqmkit applied is recorded (%s): nothing to stop\n", l.opts.Records.Dir)
		}
		return max(code, printResults(stdout, apply.StopRecords(recs, l.opts)))
	}
	qs, err := l.resolve(arg)
	if err != nil {
		fmt.Fprintf(stdout, "%s: nothing sqmkit applied is recorded, and the config names no queue for it (%v): nothing to stop\n", name, err)
		return 0
	}
	ts, err := apply.Targets(l.root, qs, "")
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit stop: %v\n", err)
		return 1
	}
	return printResults(stdout, apply.Stop(ts, l.opts))
}

// keepForRestart: sqm-scripts' hotplug stops and starts every queue on
// each ifup (its run.sh hides that ACTION; netifd's INTERFACE shows it).
// A device that is up and still configured for the same sqmkit script keeps
// its tree, which the start that follows finds as planned.
// TestSQMScriptsHotplugKeepsTree replays it.
func (l *lifecycle) keepForRestart(dev string, stdout io.Writer) bool {
	if lk := l.opts.Kernel.Link(dev); !lk.Exists || !lk.Up {
		return false
	}
	qs, err := l.resolve(dev)
	if err != nil || !strings.HasPrefix(qs[0].Script, "sqmkit-") {
		return false
	}
	fmt.Fprintf(stdout, "%s (section %s): left shaped for the start that follows this interface event\n", dev, qs[0].Section)
	return true
}

// reload applies a changed config: what sqmkit applied for a queue that is
// no longer enabled on that device (disabled, deleted, or moved) is
// removed as its record says, then the enabled queues are shaped as
// configured, changing only what differs.
func (l *lifecycle) reload(stdout, stderr io.Writer) int {
	qs, err := l.resolve("")
	if errors.Is(err, config.ErrNoneEnabled) {
		qs, err = nil, nil
	}
	code := badSections("reload", err, stderr)
	var bad *config.BadSections
	if errors.As(err, &bad) {
		err = nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit reload: %v\n", err)
		return 1
	}
	recs, err := l.opts.Records.All()
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit reload: %v\n", err) // the readable ones are still acted on
		code = 1
	}
	for _, said := range apply.RecoverTrials(l.root, qs, l.opts) {
		fmt.Fprintf(stderr, "sqmkit reload: %s\n", said)
	}
	warnRates("reload", qs, stderr)
	// a refused section's record stays: what it applied is left as it is
	stale := slices.DeleteFunc(recs, func(r applied.Record) bool {
		return slices.ContainsFunc(qs, func(q config.Queue) bool { return q.Interface == r.Device && q.Section == r.Section }) ||
			bad != nil && slices.Contains(bad.Sections, r.Section)
	})
	stopOpts := l.opts
	stopOpts.Hotplug = false
	code = max(code, printResults(stdout, apply.StopRecords(stale, stopOpts)))
	ts, err := apply.Targets(l.root, qs, l.opts.RateDir)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit reload: %v\n", err)
		return 1
	}
	l.opts.Hotplug = true
	return max(code, printResults(stdout, apply.Start(ts, l.opts)))
}

// badSections prints the sections refused for their own mistakes (each
// with its line and fix) and returns 1 when there were any; the other
// queues still run.
func badSections(cmd string, err error, stderr io.Writer) int {
	var bad *config.BadSections
	if !errors.As(err, &bad) {
		return 0
	}
	for i, e := range bad.Errs {
		fmt.Fprintf(stderr, "sqmkit %s: section %s refused: %v\n", cmd, bad.Sections[i], e)
	}
	return 1
}

// printResults prints each outcome; 1 when any failed.
func printResults(w io.Writer, rs []apply.Result) int {
	code := 0
	for _, r := range rs {
		if printResult(w, r) {
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
		Locks: &apply.Locks{Dir: apply.DefaultLockDir, Wait: lockWait}, RateDir: filepath.Join(root, ratestate.DefaultDir),
		Records: applied.Store{Dir: applied.Dir(root)}, Jobs: joblock.QueueDir(root)}
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
	// a direction is shaped only when its queue's start went through: one
	// refused whole (its error above) shaped nothing (TestRefusedStartNotShaped)
	whole := r.State == apply.Failed || r.State == apply.Waiting || r.State == apply.Skipped
	for _, d := range r.Dirs {
		status := "shaped"
		switch {
		case whole && d.Err == nil && !d.Kept:
			status = "not started (left as it was)"
		case d.Kept:
			status = "already as planned, left alone"
		case d.NotStarted:
			status = "not started (left as it was): " + d.Err.Error()
		case d.Unchanged:
			status = "FAILED, nothing changed (tc did not run; the device holds what it held before): " + d.Err.Error()
		case d.Err != nil && len(d.Left) == 0:
			status = "FAILED, no qdisc left: " + d.Err.Error()
		case d.Err != nil:
			status = "FAILED, and its rollback left " + strings.Join(d.Left, "; ") + ": " + d.Err.Error()
		}
		fmt.Fprintf(w, "  %-7s on %s: %s\n", d.Direction.Side(), d.Device, status)
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
		fmt.Fprintf(w, "  %s %s\n", d.Direction.Side(), d)
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

// warnRates says which queues' rates look like a unit slip (a start still
// applies them: a 950 kbit/s ADSL upload is real). TestRateWarningOnStart.
func warnRates(cmd string, qs []config.Queue, stderr io.Writer) {
	for _, q := range qs {
		for _, w := range q.RateWarnings() {
			fmt.Fprintf(stderr, "sqmkit %s: %s: warning: %s\n", cmd, cmp.Or(q.Section, q.Interface), w)
		}
	}
}
