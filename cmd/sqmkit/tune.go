package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/rpm"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/testrun"
	"github.com/sqmkit/sqmkit/internal/tune"
)

func init() {
	register(command{name: "tune", summary: "find the highest rates that keep the grade, against an 'sqmkit serve' past the bottleneck or a responsiveness server (--write stores them)", run: runTune})
}

func runTune(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tune", "[SERVER[:PORT]] [SECTION|IFACE] | --server SERVER|URL [SECTION|IFACE] | --undo [SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	target := fs.String("target", "A+", "the grade to keep in every loaded phase: A+ (median +5 ms, p95 +15 ms) or A (+30/+90 ms)")
	budget := fs.Duration("budget", tune.DefaultBudget, "most test time to spend, the confirming test included (0: no limit)")
	write := fs.Bool("write", false, "store the rates in the SQM config (through uci on OpenWrt) and keep the old ones for --undo")
	undo := fs.Bool("undo", false, "restore the rates the last --write replaced")
	jsonFile := fs.String("json", "", "write the search (every step) as JSON to `FILE`")
	plotFile := fs.String("plot", "", "write the rate–latency–goodput curve to `FILE` (.png or .svg)")
	token := fs.String("token", os.Getenv("SQMKIT_TOKEN"), "shared `secret` the server requires (default $SQMKIT_TOKEN)")
	v4 := fs.Bool("4", false, "use IPv4 only")
	v6 := fs.Bool("6", false, "use IPv6 only")
	sweep := fs.String("sweep", "", "measure every rate from `FROM:TO` percent of the line in 1 % steps per direction instead of searching (e.g. 80:100); changes nothing")
	line := fs.String("line", "", "with --sweep: the line's `DOWN:UP` shaper rates in kbit/s that are 100 % (e.g. the modem's sync rates; default: measured)")
	sweepStop := fs.Int("sweep-stop", 0, "with --sweep: end a direction after `N` passing steps in a row (0: every step)")
	sweepPhase := fs.Duration("sweep-phase", tune.DefaultStep, "with --sweep: the `DURATION` of each step's loaded phase (the grade a full test gives is judged on longer ones, e.g. 30s)")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long to wait while another sqmkit changes the same interface")
	serverFlag := fs.String("server", "", "the `SERVER` to measure against: a 'sqmkit serve' as HOST[:PORT] or a responsiveness server's config URL (default: the first argument; empty or none: the queue's test_server, else a public responsiveness server)")
	insecure := fs.Bool("rpm-insecure", false, "accept a responsiveness server's certificate unchecked (self-signed 'sqmkit serve --rpm')")
	anyRoute := fs.Bool("any-route", false, "tune even when the route to SERVER leaves by another device than the queue's (its tests would not load the shaper)")
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	pos := fs.Args()
	t, known := search.Targets[*target]
	// SERVER first, then SECTION; with --server (or --undo) only SECTION.
	// An empty --server= is the queue's default server (as LuCI asks for it).
	want := 2
	if *undo || flagSet(fs, "server") {
		want = 1
	}
	if msg := tuneUsage(fs, known, *target, *v4 && *v6, *sweep != "", *write || *undo, len(pos) > want); msg != "" {
		fmt.Fprintln(stderr, "sqmkit tune:", msg)
		return 2
	}
	addr, sel := tuneArgs(pos, *serverFlag, flagSet(fs, "server"), *undo)
	logf := func(s string) { fmt.Fprintln(stderr, "sqmkit tune:", s) }
	q, opts, sv, code, err := tuneQueue(*root, *file, o, sel, addr, *undo, *lockWait, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sqmkit tune:", err)
		return code
	}
	if *undo {
		old, err := tune.Undo(*root, *file, q, opts)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit tune --undo: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: download %d, upload %d kbit/s restored\n", q.Queue.Section, old.Download, old.Upload)
		return 0
	}
	if sv.Public {
		logf(sv.Note())
	}
	network := map[bool]string{true: "tcp4"}[*v4] + map[bool]string{true: "tcp6"}[*v6]
	ctx, stop := stopSignals()
	defer stop()
	live, err := tuneLive(ctx, q, opts, sv, *token, network, *root, *anyRoute, *insecure)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit tune: %v\n", err)
		return 1
	}
	s := &tune.Session{Live: live, Target: t, Budget: *budget, Write: *write, Root: *root, File: *file, Log: logf}
	if *sweep != "" {
		c, err := sweepConfig(*sweep, *line, *sweepStop, *sweepPhase)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit tune: %v\n", err)
			return 2
		}
		return runSweep(ctx, s, c, *jsonFile, stdout, stderr)
	}
	out, err := s.Run(ctx)
	if out != nil {
		testrun.Remember(*root, q.Queue, "tune", out.Confirm, s.Live.Costs, tunedOf(out), logf)
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("stopped before it finished (a signal); the shaper is back at its rates, nothing written")
	}
	if out == nil && err != nil {
		out = &tune.Outcome{}
	}
	if err = sv.Blame(err); err != nil {
		out.Error = err.Error()
	}
	// the steps and choices of a search that chose; the JSON always, so
	// whoever reads it (LuCI's page) has the reason a tune ended without
	if out.Search != nil && (err == nil || out.Search.Download.RateKbit > 0 || out.Search.Upload.RateKbit > 0) {
		printTune(stdout, out, q.Queue.Qdisc)
	}
	writeTuneFiles(*jsonFile, *plotFile, out, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit tune: %v\n", err)
		return 1
	}
	return 0
}

// tunedOf is what a tune that wrote its rates leaves in the router's
// record (nil when it wrote none).
func tunedOf(o *tune.Outcome) *history.Tuned {
	if !o.Written || o.Search == nil {
		return nil
	}
	r := o.Search
	return &history.Tuned{At: time.Now().UTC(), Down: r.Download.RateKbit, Up: r.Upload.RateKbit,
		LineDown: r.Download.Line.RateKbit, LineUp: r.Upload.Line.RateKbit, OldDown: o.Old.Download, OldUp: o.Old.Upload}
}

// tuneQueue is the one queue a tune acts on, the options that change it,
// and the server it measures against: a named one, checked before anything
// is read, else the queue's own default (testrun.Resolve). code is the
// exit status of an error (2: the server as written).
func tuneQueue(root, file string, o *config.Overrides, sel, addr string, undo bool, lockWait time.Duration, stderr io.Writer) (apply.Target, apply.Options, testrun.Server, int, error) {
	var sv testrun.Server
	var err error
	if addr != "" {
		if sv, err = testrun.Resolve(addr, nil); err != nil {
			return apply.Target{}, apply.Options{}, sv, 2, err
		}
	}
	qs, err := config.Resolve(root, file, o, sel)
	if err == nil && len(qs) > 1 {
		err = fmt.Errorf("%d queues are enabled (%s, %s, ...); name the one to tune", len(qs), qs[0].Section, qs[1].Section)
	}
	opts := systemOptions(root, tc.DefaultCacheDir, lockWait, false, stderr)
	if err != nil {
		return apply.Target{}, opts, sv, 1, err
	}
	targetsOf, err := apply.Targets(root, qs, opts.RateDir)
	if err != nil {
		return apply.Target{}, opts, sv, 1, err
	}
	if addr == "" && !undo {
		if sv, err = testrun.Resolve("", qs); err != nil {
			return apply.Target{}, opts, sv, 2, err
		}
	}
	return targetsOf[0], opts, sv, 0, nil
}

// tuneLive is the live link a tune searches: its tests against sv, which
// must load this queue's shaper (a server routed out by another device
// would tune on another link's behaviour) unless anyRoute.
func tuneLive(ctx context.Context, q apply.Target, opts apply.Options, sv testrun.Server, token, network, root string, anyRoute, insecure bool) (*tune.Live, error) {
	test := bbclient.Config{Server: sv.Addr, Token: token, Streams: bbclient.DefaultStreams, ProbeInterval: bbclient.DefaultProbeInterval, Tool: "sqmkit " + version, Network: network}
	if !anyRoute {
		on, err := testrun.RouteCheck(ctx, root, []config.Queue{q.Queue}, test.Server, test.Network, q.Queue.Section)
		if err != nil {
			return nil, err
		}
		test.Network = on.Network
	}
	live := &tune.Live{Target: q, Opts: opts, Test: test, Idle: tune.DefaultIdle, Step: tune.DefaultStep, Line: tune.DefaultLine, LineUp: tune.DefaultLineUp, CPURoot: root}
	if sv.URL {
		live.Run = func(ctx context.Context, c bbclient.Config) (*bbresult.Result, error) {
			return rpm.RunPhases(ctx, rpm.PhaseConfig{Test: c, Insecure: insecure})
		}
	}
	return live, nil
}

// tuneArgs splits tune's arguments into the server ("" the default) and
// the SECTION: SERVER first, then SECTION; --server given, even empty (the
// default server, as LuCI asks for it), or --undo leaves the one argument
// to the SECTION (TestTuneArgs).
func tuneArgs(pos []string, serverFlag string, serverSet, undo bool) (addr, sel string) {
	if serverSet || undo {
		if len(pos) > 0 {
			sel = pos[0]
		}
		return serverFlag, sel
	}
	if len(pos) > 0 {
		addr = pos[0]
	}
	if len(pos) > 1 {
		sel = pos[1]
	}
	return addr, sel
}

// tuneUsage says what is wrong with tune's flags and arguments, "" when
// nothing is.
func tuneUsage(fs *flag.FlagSet, known bool, target string, both46, sweep, writeOrUndo, badArgs bool) string {
	switch {
	case !known:
		return fmt.Sprintf("--target %q: want A+ or A", target)
	case both46:
		return "-4 and -6 exclude each other"
	case sweep && writeOrUndo:
		return "--sweep measures and changes nothing; it does not combine with --write or --undo"
	case !sweep && sweepOnly(fs) != "":
		return sweepOnly(fs) + " goes with --sweep FROM:TO (a search measures the line and sets its own phases)"
	case badArgs:
		return "want at most a SERVER and a SECTION or IFACE, and with --server or --undo at most the SECTION or IFACE (see -h)"
	}
	return ""
}

// writeTuneFiles writes the search as JSON and its plot where asked.
func writeTuneFiles(jsonFile, plotFile string, out *tune.Outcome, stderr io.Writer) {
	if jsonFile != "" {
		writeTuneJSON(jsonFile, out, stderr)
	}
	if plotFile != "" && out.Search != nil {
		if err := writeTunePlot(plotFile, out.Search); err != nil {
			fmt.Fprintf(stderr, "sqmkit tune: %v\n", err)
		}
	}
}

// printSteps prints one line per rate tried.
func printSteps(w io.Writer, t search.Target, steps []search.Step) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\trate kbit/s\t% of line\tadded median/p95 ms\tdown/up ms\tgoodput kbit/s\tverdict\t")
	for _, st := range steps {
		if st.Target != "" {
			t.Name = st.Target
		}
		v := "meets " + t.Name
		if !st.Pass {
			v = "misses"
		}
		switch {
		case st.Again:
			v += " (measured twice)"
		case st.Unsettled:
			v += " (borderline, no budget to measure again)"
		}
		rate, share := fmt.Sprint(st.RateKbit), fmt.Sprintf("%.0f", 100*st.Share)
		if st.Kind == search.Bidir {
			rate, share = fmt.Sprintf("%d/%d", st.RateKbit, st.Other), "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s / %s\t%s / %s\t%d\t%s\t\n", st.Kind, rate, share, bbresult.Signed(st.AddedMedian, 1), bbresult.Signed(st.AddedP95, 1),
			bbresult.Fixed(st.AddedDown, 1), bbresult.Fixed(st.AddedUp, 1), st.GoodputKbit, v)
	}
	tw.Flush()
}

// printTune prints the steps per direction, the rates chosen and why, and
// the goodput gained over the 95 % rule; qdisc is the queue's, for the fix
// a CPU-bound line names.
func printTune(w io.Writer, o *tune.Outcome, qdisc string) {
	r := o.Search
	printSteps(w, r.Target, r.Steps)
	for _, c := range []struct {
		name string
		ch   search.Choice
	}{{"download", r.Download}, {"upload", r.Upload}} {
		l := c.ch.Line
		fmt.Fprintf(w, "%s: %d kbit/s (%.0f%% of the line's %d): %s\n", c.name, c.ch.RateKbit, 100*float64(c.ch.RateKbit)/float64(max(l.RateKbit, 1)), l.RateKbit, c.ch.Why)
		if c.ch.OutOfReach != "" {
			fmt.Fprintf(w, "  tuned for %s: %s\n", c.ch.Target.Name, c.ch.OutOfReach)
		}
		if cpu := l.CPU; cpu != nil {
			fmt.Fprintf(w, "  CPU-bound at %d kbit/s: with the shaper open cpu%d was busy %.0f%% (%.0f%% softirq), so %s; the rate is the highest that keeps %s on this router\n  fix: %s\n",
				l.GoodputKbit, cpu.Busiest, 100*cpu.BusiestShare, 100*cpu.BusiestSoftirq, cpuload.WhoseCeiling(*cpu), c.ch.Target.Name, cpuload.Fix(*cpu, qdisc))
		}
		if l.BoostKbit > 0 {
			fmt.Fprintf(w, "  the line gave %d kbit/s goodput in its first seconds and %d sustained: a boost, not the line rate\n", l.BoostKbit, l.GoodputKbit)
		}
		switch {
		case c.ch.Rule95Goodput > 0 && c.ch.GoodputKbit > 0:
			fmt.Fprintf(w, "  the 95%% rule would set %d kbit/s (%d kbit/s goodput); tune's rate: %d kbit/s goodput (%+d)\n",
				c.ch.Rule95, c.ch.Rule95Goodput, c.ch.GoodputKbit, c.ch.GoodputKbit-c.ch.Rule95Goodput)
		case c.ch.Rule95 > 0:
			fmt.Fprintf(w, "  the 95%% rule would set %d kbit/s, which misses %s here\n", c.ch.Rule95, c.ch.Target.Name)
		}
	}
	if r.BidirOutOfReach != "" {
		fmt.Fprintf(w, "bidirectional: judged against %s: %s\n", r.BidirTarget.Name, r.BidirOutOfReach)
	}
	if c := r.BidirCPU; c != nil {
		fmt.Fprintf(w, "bidirectional: CPU-bound at %.0f kbit/s both ways together: cpu%d was busy %.0f%% (%.0f%% softirq), so both rates came down to fit it; %s\n  fix: %s\n",
			1000*c.ShapedMbps, c.Busiest, 100*c.BusiestShare, 100*c.BusiestSoftirq, cpuload.WhoseCeiling(*c), cpuload.Fix(*c, qdisc))
	}
	// The figures printed are the ones tune judged, after each phase's first
	// search.Transient seconds: the whole phase's p95 can hold a start-up
	// burst that the grade beside it seems to contradict (TestPrintTuneJudged).
	if o.Confirm != nil {
		fmt.Fprintf(w, "confirming test: grade %s; judged after each phase's first %g s:", o.Confirm.Grades.DSLReports, search.Transient)
		sep := " "
		for _, ph := range o.Confirm.Phases {
			if p, err := search.PhaseOf(o.Confirm, search.Kind(ph.Name)); err == nil && ph.Grade != "" {
				fmt.Fprintf(w, "%s%s %s/%s ms", sep, ph.Name, bbresult.Signed(p.AddedMedian, 1), bbresult.Signed(p.AddedP95, 1))
				sep = ", "
			}
		}
		fmt.Fprintln(w)
	}
	if o.Again != nil {
		for _, ph := range o.Again.Phases {
			if p, err := search.PhaseOf(o.Again, search.Kind(ph.Name)); err == nil && ph.Grade != "" {
				fmt.Fprintf(w, "  its %s phase measured again: %s/%s ms (judged on the mean of the two)\n", ph.Name, bbresult.Signed(p.AddedMedian, 1), bbresult.Signed(p.AddedP95, 1))
			}
		}
	}
	switch {
	case o.Written:
		fmt.Fprintf(w, "written to the config (was %d/%d; sqmkit tune --undo restores it); test time %s\n", o.Old.Download, o.Old.Upload, o.Spent.Round(time.Second))
	default:
		fmt.Fprintf(w, "nothing written; the shaper is back at its rates (--write stores these); test time %s\n", o.Spent.Round(time.Second))
	}
}

// sweepOnly names a flag given that only a sweep reads ("" none).
func sweepOnly(fs *flag.FlagSet) string {
	var name string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "line", "sweep-stop", "sweep-phase":
			name = "--" + f.Name
		}
	})
	return name
}

// sweepConfig parses --sweep FROM:TO (percent) and --line DOWN:UP (kbit/s).
func sweepConfig(sweep, line string, stopAfter int, phase time.Duration) (search.SweepConfig, error) {
	c := search.SweepConfig{Step: 0.01, StopAfter: stopAfter, Phase: phase}
	var from, to float64
	if n, err := fmt.Sscanf(sweep, "%g:%g", &from, &to); n != 2 || err != nil || from <= 0 || to < from || to > 200 {
		return c, fmt.Errorf("--sweep %q: want FROM:TO in percent of the line, e.g. 80:100", sweep)
	}
	c.From, c.To = from/100, to/100
	if line != "" {
		r, err := ratePair("--line", line, "40000:8000")
		if err != nil {
			return c, err
		}
		c.LineDown, c.LineUp = r.Download, r.Upload
	}
	if stopAfter < 0 {
		return c, fmt.Errorf("--sweep-stop %d: want 0 (every step) or more", stopAfter)
	}
	// a phase must hold some steady state after the transient tune
	// leaves out of every judgement
	if least := time.Duration(2 * search.Transient * float64(time.Second)); phase < least {
		return c, fmt.Errorf("--sweep-phase %v: want at least %v (the first %gs of each phase are left out as slow start's transient)", phase, least, search.Transient)
	}
	return c, nil
}

// runSweep prints every step and the best rate per direction.
func runSweep(ctx context.Context, s *tune.Session, c search.SweepConfig, jsonFile string, stdout, stderr io.Writer) int {
	r, err := s.Sweep(ctx, c)
	if r != nil {
		printSteps(stdout, r.Target, r.Steps)
		for _, d := range []struct {
			name               string
			best, oneWay, line int
			target             string
		}{{"download", r.BestDown, r.OneWayDown, r.LineDown, r.TargetDown}, {"upload", r.BestUp, r.OneWayUp, r.LineUp, r.TargetUp}} {
			alone := ""
			if d.oneWay != d.best {
				alone = fmt.Sprintf(" (its own phase alone: %d kbit/s)", d.oneWay)
			}
			if d.best == 0 {
				fmt.Fprintf(stdout, "%s: no rate in the range meets %s in every phase%s\n", d.name, d.target, alone)
				continue
			}
			fmt.Fprintf(stdout, "%s: best %d kbit/s (%.0f%% of %d): the highest rate meeting %s in its phase (the next lower step meeting it too) and in each of %d bidirectional phases%s\n",
				d.name, d.best, 100*float64(d.best)/float64(d.line), d.line, d.target, search.HoldPhases, alone)
		}
		if jsonFile != "" {
			writeTuneJSON(jsonFile, r, stderr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit tune --sweep: %v\n", err)
		return 1
	}
	return 0
}

func writeTuneJSON(path string, v any, stderr io.Writer) {
	if err := writeFile(path, func(f *os.File) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}); err != nil {
		fmt.Fprintf(stderr, "sqmkit tune: %v\n", err)
	}
}

// flagSet reports whether the command line gave flag name, even empty.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
