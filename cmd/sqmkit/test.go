package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report"
	"github.com/sqmkit/sqmkit/internal/rpm"
	"github.com/sqmkit/sqmkit/internal/testrun"
)

func init() {
	register(command{name: "test", summary: "measure bufferbloat against an 'sqmkit serve' server or a responsiveness server's URL, by default a public one (or --compare two runs)", run: runTest})
}

func runTest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", "[SERVER[:PORT] | https://RESPONSIVENESS-SERVER/config] | --compare A.json B.json")
	fs.SetOutput(stderr)
	cfg := bbclient.Config{Tool: "sqmkit " + version}
	fs.DurationVar(&cfg.Idle, "idle", bbclient.DefaultIdle, "length of each idle phase, before and after the load (0 skips)")
	fs.DurationVar(&cfg.Download, "download", bbclient.DefaultLoad, "download phase length (0 skips)")
	fs.DurationVar(&cfg.Upload, "upload", bbclient.DefaultLoad, "upload phase length (0 skips)")
	fs.DurationVar(&cfg.Bidir, "bidir", bbclient.DefaultLoad, "download+upload phase length (0 skips)")
	fs.IntVar(&cfg.Streams, "streams", bbclient.DefaultStreams, "TCP streams per loaded direction")
	fs.DurationVar(&cfg.ProbeInterval, "probe-interval", bbclient.DefaultProbeInterval, "UDP latency probe interval")
	fs.BoolVar(&cfg.OneSegment, "one-segment", false, "upload streams send one TCP segment per packet, as a router forwards its clients' (for a test on the router itself over a slow uplink)")
	fs.StringVar(&cfg.Token, "token", os.Getenv("SQMKIT_TOKEN"), "shared `secret` the server requires (default $SQMKIT_TOKEN)")
	v4 := fs.Bool("4", false, "use IPv4 only")
	v6 := fs.Bool("6", false, "use IPv6 only")
	port := fs.Int("port", 0, "server port (default: from SERVER, else 8693)")
	jsonFile := fs.String("json", "", "write every sample and the summary as JSON to `FILE`")
	plotFile := fs.String("plot", "", "write a time-series plot to `FILE` (.png or .svg)")
	flentFile := fs.String("flent", "", "write a flent rrul data file to `FILE.flent.gz` (open with flent -i)")
	rpmURL := fs.String("rpm", "", "also measure responsiveness (RPM) against this `URL` or host[:port] (an RPM server, e.g. 'sqmkit serve --rpm'); alone, without SERVER, only RPM")
	rpmInsecure := fs.Bool("rpm-insecure", false, "accept a responsiveness server's certificate unchecked (self-signed 'sqmkit serve --rpm')")
	rpmConns := fs.Int("rpm-conns", rpm.MaxConns, "with --rpm: the most load connections per direction, `N` from 1 to 16 (the draft's maximum, 16)")
	rpmRate := fs.Int("rpm-rate", rpm.MaxRate, "with --rpm: the most probe pairs per second, `N` from 1 to 100 (the draft's maximum, 100); each pair opens a TLS connection, so fewer spare a slow CPU")
	compare := fs.Bool("compare", false, "print two saved runs (--json files) side by side instead of testing")
	root := fs.String("root", "/", "on a router: read its queues (/etc/config/sqm) and devices under `DIR`")
	anyRoute := fs.Bool("any-route", false, "on a router: test even when the route to SERVER leaves by a device no queue shapes (and skip the counter check)")
	quiet := fs.Bool("quiet", false, "no progress display")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	pos, ro := fs.Args(), rpmOptions{*rpmInsecure, *rpmConns, *rpmRate}
	if err := checkRPMLimits(fs, ro, *rpmURL); err != nil {
		fmt.Fprintln(stderr, "sqmkit test:", err)
		return 2
	}
	switch {
	case *compare:
		return runCompare(pos, stdout, stderr)
	case len(pos) == 0 && *rpmURL != "":
		return runRPMOnly(*rpmURL, ro, stdout, stderr)
	case len(pos) > 1:
		fmt.Fprintln(stderr, "sqmkit test: want one SERVER at most (see -h)")
		return 2
	}
	queues, err := testrun.RouterQueues(*root) // none off a router
	if err != nil {
		fmt.Fprintln(stderr, "sqmkit test:", err)
		return 1
	}
	sv, err := testrun.Resolve(strings.Join(pos, ""), queues)
	if err == nil {
		err = testConfig(&cfg, sv, *v4, *v6, *port, *rpmURL)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sqmkit test:", err)
		return 2
	}
	var pr *report.Progress
	if !*quiet {
		pr = report.NewProgress(stderr, isTerminal(stderr))
		cfg.Progress = func(p bbclient.Progress) { pr.Update(p.Phase, p.Elapsed, p.Total, p.DownMbps, p.UpMbps, p.RTT) }
	}
	ctx, stop := stopSignals()
	defer stop()
	res, err := testrun.Test(ctx, testrun.Options{Config: cfg, Server: sv, Root: *root, Queues: queues, AnyRoute: *anyRoute, Insecure: *rpmInsecure,
		Warn: func(s string) { fmt.Fprintln(stderr, "sqmkit test:", s) }})
	if pr != nil {
		pr.Done() // the summary must not share a line with the display
	}
	if err != nil {
		fmt.Fprintln(stderr, "sqmkit test:", err)
		return 1
	}
	if *rpmURL != "" {
		// After the bufferbloat test, not during it: both load the link.
		r, notes, err := measureRPM(ctx, *rpmURL, ro)
		res.RPM = r // what was measured, also when cut short
		for _, n := range notes {
			res.Notes = append(res.Notes, "rpm: "+n)
		}
		if err != nil {
			res.Notes = append(res.Notes, "rpm: "+err.Error())
		}
	}
	rc := writeOutputs(res, *jsonFile, *plotFile, *flentFile, stdout, stderr)
	if res.Incomplete != "" {
		return 1 // measured, not graded: no exit status of a pass
	}
	return rc
}

// testConfig completes a test's configuration for server sv from the
// flags: the family (-4, -6) and a port; a responsiveness server takes
// neither --port nor --rpm.
func testConfig(cfg *bbclient.Config, sv testrun.Server, v4, v6 bool, port int, rpmURL string) error {
	if sv.URL && (port != 0 || rpmURL != "") {
		return errors.New("a responsiveness server (a URL) takes neither --port nor --rpm: its test measures the RPM itself")
	}
	cfg.Server = sv.Addr
	switch {
	case v4 && v6:
		return errors.New("-4 and -6 exclude each other")
	case v4:
		cfg.Network = "tcp4"
	case v6:
		cfg.Network = "tcp6"
	}
	if port != 0 {
		if port < 1 || port > 65535 {
			return fmt.Errorf("--port %d out of range 1..65535", port)
		}
		host, _ := bbproto.SplitHostPort(cfg.Server)
		cfg.Server = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return cfg.Check()
}

// checkRPMLimits refuses --rpm-conns and --rpm-rate out of range, or given
// without --rpm.
func checkRPMLimits(fs *flag.FlagSet, ro rpmOptions, rpmURL string) error {
	for _, f := range []struct {
		name, what string
		n, most    int
	}{{"rpm-conns", "load connections per direction", ro.conns, rpm.MaxConns}, {"rpm-rate", "probe pairs per second", ro.rate, rpm.MaxRate}} {
		if err := checkRPMLimit(f.name, f.what, f.n, f.most, flagSet(fs, f.name) && rpmURL == ""); err != nil {
			return err
		}
	}
	return nil
}

// runRPMOnly runs just the responsiveness test, for servers that speak
// only that protocol (Apple's, goresponsiveness').
func runRPMOnly(url string, opts rpmOptions, stdout, stderr io.Writer) int {
	ctx, stop := stopSignals()
	defer stop()
	r, notes, err := measureRPM(ctx, url, opts)
	if r != nil {
		cut := ""
		if err != nil {
			cut = ", cut short: what was measured until then"
		}
		fmt.Fprintf(stdout, "%s: %.0f RPM (download %.1f Mbit/s, upload %.1f Mbit/s%s)\n", r.URL, r.RPM, r.DownloadMbps, r.UploadMbps, cut)
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, "Note:", n)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sqmkit test --rpm:", err)
		return 1
	}
	return 0
}

// rpmOptions are test's flags for the responsiveness test (--rpm).
type rpmOptions struct {
	insecure bool
	conns    int
	rate     int // probe pairs per second at most
}

// checkRPMLimit refuses a limit of the responsiveness test (--rpm-conns,
// --rpm-rate) out of 1 to most, or one given alone (without --rpm), where
// it would silently change nothing.
func checkRPMLimit(name, what string, n, most int, alone bool) error {
	switch {
	case alone:
		return fmt.Errorf("--%s sets the responsiveness test's %s: give it with --rpm URL", name, what)
	case n < 1 || n > most:
		return fmt.Errorf("--%s %d: want 1 to %d %s", name, n, most, what)
	}
	return nil
}

func writeOutputs(res *bbresult.Result, jsonFile, plotFile, flentFile string, stdout, stderr io.Writer) int {
	rc := 0
	if err := report.WriteSummary(stdout, res); err != nil {
		fmt.Fprintln(stderr, "sqmkit test:", err)
		rc = 1
	}
	if jsonFile != "" {
		if err := writeFile(jsonFile, func(f *os.File) error { return report.WriteJSON(f, res) }); err != nil {
			fmt.Fprintln(stderr, "sqmkit test: --json:", err)
			rc = 1
		}
	}
	if plotFile != "" {
		if err := writePlot(plotFile, res); err != nil {
			fmt.Fprintln(stderr, "sqmkit test: --plot:", err)
			rc = 1
		}
	}
	if flentFile != "" {
		if err := writeFlent(flentFile, res); err != nil {
			fmt.Fprintln(stderr, "sqmkit test: --flent:", err)
			rc = 1
		}
	}
	return rc
}

func writeFile(name string, write func(*os.File) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runCompare(files []string, stdout, stderr io.Writer) int {
	if len(files) != 2 {
		fmt.Fprintln(stderr, "sqmkit test --compare: want two files: BEFORE.json AFTER.json")
		return 2
	}
	var runs [2]*bbresult.Result
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, "sqmkit test --compare:", err)
			return 1
		}
		runs[i], err = report.ReadJSON(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "sqmkit test --compare: %s: %v\n", name, err)
			return 1
		}
	}
	if err := report.Compare(stdout, runs[0], runs[1]); err != nil {
		fmt.Fprintln(stderr, "sqmkit test --compare:", err)
		return 1
	}
	return 0
}

// isTerminal says whether w is a terminal, for the live progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && report.IsTerminal(f)
}
