package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/openwrt"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

func init() {
	register(command{name: "autorate", summary: "follow a link whose capacity moves: keep moving the running queue's rates between a floor and a ceiling from the delay it adds", run: runAutorate})
}

func runAutorate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("autorate", "[SECTION|IFACE]")
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "read /etc and /sys under `DIR`")
	file := fs.String("config", "", "SQM config `FILE` (default DIR/etc/config/sqm)")
	server := fs.String("server", "", "one-way delay from this sqmkit serve `HOST[:PORT]` (default: the section's autorate_server; none: reflectors)")
	reflectors := fs.String("reflectors", "", "round-trip delay to these ICMP echo `ADDRS` (comma or space separated; default: autorate_reflectors, else public resolvers)")
	minR := fs.String("min", "", "floor `DOWN:UP` in kbit/s (default: autorate_min_*, else a fifth of the configured rates)")
	maxR := fs.String("max", "", "ceiling `DOWN:UP` in kbit/s (default: autorate_max_*, else twice the configured rates)")
	metrics := fs.String("metrics", "", "serve Prometheus metrics on `ADDR` (e.g. 127.0.0.1:9464)")
	token := fs.String("token", os.Getenv("SQMKIT_TOKEN"), "shared `secret` the server requires (default $SQMKIT_TOKEN)")
	verbose := fs.Bool("v", false, "a summary line every second instead of every minute")
	lockWait := fs.Duration("lock-wait", 30*time.Second, "how long to wait while another sqmkit changes the same interface")
	list := fs.Bool("list", false, "print the enabled sections with option autorate '1', one per line, and exit (the init script starts one autorate per line)")
	o := config.RegisterFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if *list {
		return listAutorate(*root, *file, o, stdout, stderr)
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "sqmkit autorate: one SECTION or IFACE at most, got %q\n", fs.Args())
		return 2
	}
	if *server != "" {
		if err := bbproto.CheckServer(*server); err != nil {
			fmt.Fprintf(stderr, "sqmkit autorate: --server: %v\n", err)
			return 2
		}
	}
	t, code, err := autorateTarget(*root, *file, o, fs.Arg(0), *minR, *maxR)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit autorate: %v\n", err)
		return code
	}
	q := t.Queue
	lo, hi := q.AutorateMin, q.AutorateMax
	src, err := delaySource(q, *server, *reflectors, *token, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit autorate: %v\n", err)
		return 2
	}
	opts := systemOptions(*root, tc.DefaultCacheDir, *lockWait, false, stderr)
	opts.Log = nil // autorate logs its own line per change
	f, err := apply.Follow(t, "sqmkit autorate", opts)
	if err != nil {
		fmt.Fprintf(stderr, "sqmkit autorate: %s: %v\n", q.Interface, err)
		return 1
	}
	defer f.Close()
	logf := func(s string) { fmt.Fprintf(stderr, "sqmkit autorate: %s: %s\n", q.Section, s) }
	p := autorate.DefaultParams([2]int{lo.Download, lo.Upload}, [2]int{q.Download, q.Upload}, [2]int{hi.Download, hi.Upload})
	bits := plan.MaxPacketBits(q, t.Facts)
	p.PacketBits = [2]int{bits, bits}
	d := &autorate.Daemon{Shaper: f, Root: *root, Source: src, Log: logf, Metrics: &autorate.Metrics{CPU: func() (cpuload.Record, bool) { return cpuload.Load(*root, q.Section) }}, StatusFile: autorate.StatusPath(*root, q.Section),
		Params: p}
	d.Devices = f.Devices()
	if *verbose {
		d.Summary = time.Second
	}
	if *metrics != "" {
		l, err := net.Listen("tcp", *metrics)
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit autorate: --metrics: %v\n", err)
			return 1
		}
		defer l.Close()
		go d.Metrics.Serve(l)
	}
	// One P: the daemon's work is a few microseconds every 50 ms, and idle
	// Ps spinning for work on every wakeup cost more than the work itself
	// (on a router, and in the lab's emulated guest).
	runtime.GOMAXPROCS(1)
	ctx, stop := stopSignals()
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "sqmkit autorate: %v\n", err)
		return 1
	}
	return 0
}

// listAutorate prints the enabled sections with option autorate '1' whose
// shaper sqmkit applies: with sqm-scripts' service enabled, only those
// with a sqmkit-*.qos script (the others' trees are sqm-scripts' own,
// which autorate cannot follow: an instance for one would exit at once
// and procd would start it again every few seconds, for ever).
func listAutorate(root, file string, o *config.Overrides, stdout, stderr io.Writer) int {
	qs, err := config.Resolve(root, file, o, "")
	var bad *config.BadSections
	if err != nil && !errors.Is(err, config.ErrNoneEnabled) && !errors.As(err, &bad) {
		fmt.Fprintf(stderr, "sqmkit autorate: %v\n", err)
		return 1
	}
	badSections("autorate", err, stderr)
	foreign := openwrt.SQMScriptsApplies(root)
	for _, q := range qs {
		switch {
		case !q.Autorate:
		case foreign && !strings.HasPrefix(q.Script, "sqmkit-"):
			fmt.Fprintf(stderr, "sqmkit autorate: section %s: sqm-scripts runs its own %s there, which autorate cannot follow; not started (pick a sqmkit-*.qos script to have it followed)\n", q.Section, q.Script)
		default:
			fmt.Fprintln(stdout, q.Section)
		}
	}
	return 0
}

// autorateTarget is the one queue to follow, with its floor and ceiling
// from --min and --max over the config's, checked; code is the exit status
// of an error (2: a bad flag).
func autorateTarget(root, file string, o *config.Overrides, name, minR, maxR string) (apply.Target, int, error) {
	qs, err := config.Resolve(root, file, o, name)
	if err == nil && len(qs) > 1 {
		err = fmt.Errorf("%d queues are enabled (%s and %s, ...); name the one to follow", len(qs), qs[0].Section, qs[1].Section)
	}
	var ts []apply.Target
	if err == nil {
		ts, err = apply.Targets(root, qs, "")
	}
	if err != nil {
		return apply.Target{}, 1, err
	}
	t := ts[0]
	lo, hi := t.Queue.AutorateBounds()
	for _, f := range []struct {
		name, v string
		r       *config.Rates
	}{{"--min", minR, &lo}, {"--max", maxR, &hi}} {
		if f.v == "" {
			continue
		}
		r, err := ratePair(f.name, f.v, "10000:2000")
		if err != nil {
			return t, 2, err
		}
		*f.r = r
	}
	t.Queue.Autorate, t.Queue.AutorateMin, t.Queue.AutorateMax = true, lo, hi
	return t, 1, t.Queue.Validate()
}

// delaySource is the server when one is named, else the reflectors.
func delaySource(q config.Queue, server, reflectors, token string, stderr io.Writer) (autorate.Source, error) {
	logf := func(s string) { fmt.Fprintf(stderr, "sqmkit autorate: %s: %s\n", q.Section, s) }
	if server == "" && reflectors == "" {
		server = q.AutorateServer
	}
	if server != "" {
		return &autorate.Server{Addr: server, Token: token, Log: logf}, nil
	}
	if reflectors == "" {
		reflectors = q.AutorateReflectors
	}
	list := strings.FieldsFunc(reflectors, func(r rune) bool { return r == ',' || r == ' ' })
	if len(list) == 0 {
		list = autorate.DefaultReflectors
	}
	r := &autorate.Reflectors{Log: logf}
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--reflectors: %q is not an IP address", s)
		}
		r.Addrs = append(r.Addrs, a)
	}
	return r, nil
}
