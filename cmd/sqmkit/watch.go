package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/testrun"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/internal/watch"
)

func init() {
	register(command{name: "watch", summary: "keep a shaper right after the day it was set: notice delay under load past the router, and (option watch_test) a line that got faster or slower", run: runWatch})
}

func runWatch(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	reflectors := fs.String("reflectors", "", "round-trip delay to these ICMP echo `ADDRS` (default: autorate_reflectors, else public resolvers)")
	probe := fs.Duration("probe-interval", watch.DefaultProbe, "one delay probe and one read of the shaper's counters every `DURATION`")
	window := fs.Duration("window", watch.DefaultParams.Window, "judge the last `DURATION` of minutes")
	minMinutes := fs.Int("min-minutes", watch.DefaultParams.MinMinutes, "the least loaded `MINUTES` of a direction in the window that are evidence")
	check := fs.String("check", "", "the scheduled check: daily, weekly or off (default: the section's option watch_test)")
	quietHours := fs.String("quiet-hours", fmt.Sprintf("%d:%d", watch.QuietHours[0], watch.QuietHours[1]), "local hours `FROM:TO` in which the check may start")
	quietFor := fs.Duration("quiet-for", 10*time.Minute, "how long the link must have been idle before the check starts")
	metrics := fs.String("metrics", "", "serve Prometheus metrics on `ADDR` (e.g. 127.0.0.1:9465)")
	token := fs.String("token", "", "shared `secret` the test server requires")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long the check waits while another sqmkit changes the same interface")
	list := fs.Bool("list", false, "print the enabled sections the watch runs for (autorate off, option watch not 0), one per line, and exit")
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if *list {
		return listWatch(*root, *file, o, stdout, stderr)
	}
	var hours [2]int
	if n, err := fmt.Sscanf(*quietHours, "%d:%d", &hours[0], &hours[1]); n != 2 || err != nil || hours[0] < 0 || hours[1] > 24 || hours[0] >= hours[1] {
		fmt.Fprintf(stderr, "sqmkit watch: --quiet-hours %q: want FROM:TO, whole hours from 0 to 24, e.g. 3:5\n", *quietHours)
		return 2
	}
	if fs.NArg() > 1 || *probe < 100*time.Millisecond || *window < time.Minute || *minMinutes < 1 || *quietFor < time.Minute {
		fmt.Fprintln(stderr, "sqmkit watch: want one SECTION or IFACE at most, --probe-interval of 100ms or more, --window of a minute or more, --min-minutes of 1 or more, --quiet-for of a minute or more")
		return 2
	}
	t, d, err := watchDaemon(*root, *file, o, fs.Arg(0), *reflectors, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit watch: %v\n", err)
		return 1
	}
	q := t.Queue
	d.Probe, d.Params.Window, d.Params.MinMinutes, d.QuietHours, d.QuietFor = *probe, *window, *minMinutes, hours, *quietFor
	if d.Every = q.WatchTest; flagSet(fs, "check") {
		d.Every = map[string]string{"daily": "daily", "weekly": "weekly"}[*check]
	}
	if d.Every != "" {
		d.Check = func(ctx context.Context) (history.Entry, error) {
			return scheduledCheck(ctx, t, systemOptions(*root, tc.DefaultCacheDir, *lockWait, false, stderr), *root, *token, d.Log)
		}
	}
	if *metrics != "" {
		l, err := net.Listen("tcp", *metrics)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit watch: --metrics: %v\n", err)
			return 1
		}
		defer l.Close()
		go autorate.ServeText(l, d.WriteMetrics)
	}
	runtime.GOMAXPROCS(1) // a probe and a read every few seconds
	ctx, stop := stopSignals()
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "sqmkit watch: %v\n", err)
		return 1
	}
	return 0
}

// watchDaemon is the watch of the one queue name selects: its shaper's
// devices (the download's IFB, the upload's device), its rates as they
// run (those sqmkit rate or a tune last set, else the configured), and
// the reflectors for its delay probe.
func watchDaemon(root, file string, o *config.Overrides, name, reflectors string, stderr io.Writer) (apply.Target, *watch.Daemon, error) {
	qs, err := config.Resolve(root, file, o, name)
	if err == nil && len(qs) > 1 {
		err = fmt.Errorf("%d queues are enabled (%s and %s, ...); name the one to watch", len(qs), qs[0].Section, qs[1].Section)
	}
	var ts []apply.Target
	if err == nil {
		ts, err = apply.Targets(root, qs, "")
	}
	if err != nil {
		return apply.Target{}, nil, err
	}
	t := ts[0]
	q := t.Queue
	p, err := plan.Build(q, t.Facts)
	if err != nil {
		return t, nil, err
	}
	d := &watch.Daemon{Root: root, Section: q.Section, Params: watch.DefaultParams,
		Log: func(s string) { fmt.Fprintf(stderr, "sqmkit watch: %s: %s\n", q.Section, s) }}
	for _, dir := range p.Dirs {
		d.Devices[dir.Direction] = dir.Device
	}
	if d.Devices[config.Download] == "" || d.Devices[config.Upload] == "" {
		return t, nil, errors.New("the watch needs both directions shaped (download and upload set)")
	}
	rateDir := filepath.Join(root, ratestate.DefaultDir)
	d.Rates = func() [2]int {
		now := q
		ratestate.Apply(rateDir, &now) // what sqmkit rate or a tune set since the start
		return [2]int{now.Download, now.Upload}
	}
	src, err := delaySource(config.Queue{Section: q.Section, AutorateReflectors: q.AutorateReflectors}, "", reflectors, "", stderr)
	d.Source = src
	return t, d, err
}

// scheduledCheck is the watch's check on t: the line measured with the
// shaper open (10 s down, 8 s up, as tune measures it), then a short
// test (2 s idle, 5 s each way) at the queue's rates, against its test
// server (the public default if none).
func scheduledCheck(ctx context.Context, t apply.Target, opts apply.Options, root, token string, logf func(string)) (history.Entry, error) {
	sv, err := testrun.Resolve("", []config.Queue{t.Queue})
	if err != nil {
		return history.Entry{}, err
	}
	live, err := tuneLive(ctx, t, opts, sv, token, "", root, false, false)
	if err != nil {
		return history.Entry{}, err
	}
	live.Line, live.LineUp = 10*time.Second, 8*time.Second
	s := &tune.Session{Live: live, Root: root, Log: logf}
	test := live.Test
	test.Idle, test.Download, test.Upload, test.Bidir = 2*time.Second, 5*time.Second, 5*time.Second, 0
	down, up, res, err := s.Check(ctx, test)
	if err != nil {
		return history.Entry{}, sv.Blame(err)
	}
	if res.Incomplete != "" {
		return history.Entry{}, errors.New(res.Incomplete)
	}
	return history.Entry{At: time.Now().UTC(), By: "watch", Grade: res.Grades.DSLReports, AddedMs: res.Grades.DSLReportsAddedMs,
		Down: t.Queue.Download, Up: t.Queue.Upload, LineDown: down.RateKbit, LineUp: up.RateKbit, Server: sv.Addr}, nil
}

// listWatch prints the enabled sections the watch runs for: autorate off
// (autorate follows the line itself) and option watch not 0.
func listWatch(root, file string, o *config.Overrides, stdout, stderr io.Writer) int {
	qs, err := config.Resolve(root, file, o, "")
	var bad *config.BadSections
	if err != nil && !errors.Is(err, config.ErrNoneEnabled) && !errors.As(err, &bad) {
		fmt.Fprintf(stderr, "sqmkit watch: %v\n", err)
		return 1
	}
	badSections("watch", err, stderr)
	for _, q := range qs {
		if !q.Autorate && !q.WatchOff && q.Download > 0 && q.Upload > 0 {
			fmt.Fprintln(stdout, q.Section)
		}
	}
	return 0
}
