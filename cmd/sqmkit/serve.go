package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbserver"
)

func init() {
	register(command{name: "serve", summary: "run a bufferbloat test server (TCP and UDP on one port)", run: runServe})
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// byteFlag is a byte count with an optional SI suffix ("25G").
type byteFlag int64

func (b *byteFlag) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteFlag) Set(v string) error {
	mult := 1.0
	if i := strings.IndexAny(v, "KMGTkmgt"); i >= 0 && i == len(v)-1 {
		mult = map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}[v[i]|0x20]
		v = v[:i]
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f*mult < 1 || f*mult > 1e18 {
		return fmt.Errorf("want a positive byte count like 25G or 500M")
	}
	*b = byteFlag(f * mult)
	return nil
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "")
	fs.SetOutput(stderr)
	var listen listFlag
	fs.Var(&listen, "listen", fmt.Sprintf("`ADDR` to listen on, TCP and UDP (repeatable; default :%d, which is dual-stack)", bbproto.DefaultPort))
	var cfg bbserver.Config
	fs.StringVar(&cfg.Token, "token", os.Getenv("SQMKIT_TOKEN"), "shared `secret` clients must send (default $SQMKIT_TOKEN)")
	fs.IntVar(&cfg.MaxTests, "max-tests", bbserver.DefaultMaxTests, "concurrent tests")
	fs.DurationVar(&cfg.MaxDuration, "max-duration", bbserver.DefaultMaxDuration, "longest test accepted")
	cfg.MaxBytes = bbserver.DefaultMaxBytes
	fs.Var((*byteFlag)(&cfg.MaxBytes), "max-bytes", "payload `bytes` per test, both directions together (suffixes K, M, G, T: powers of 1000)")
	fs.IntVar(&cfg.PerIP, "per-ip", bbserver.DefaultPerIP, "tests per client address (IPv6: per /64) per minute")
	fs.IntVar(&cfg.MaxStreams, "max-streams", bbserver.DefaultMaxStreams, "TCP streams per direction per test")
	rpmListen := fs.String("rpm", "", "also serve the responsiveness (RPM) test over HTTPS on `ADDR` (e.g. :4443), for networkQuality and 'sqmkit test --rpm'")
	rpmCert := fs.String("rpm-cert", "", "PEM certificate `FILE` for --rpm (default: a self-signed one made at start)")
	rpmKey := fs.String("rpm-key", "", "PEM key `FILE` for --rpm-cert")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sqmkit serve: unexpected argument %q (use --listen ADDR)\n", fs.Arg(0))
		return 2
	}
	if err := checkServe(cfg); err != nil {
		fmt.Fprintln(stderr, "sqmkit serve:", err)
		return 2
	}
	if *rpmListen == "" && (*rpmCert != "" || *rpmKey != "") {
		fmt.Fprintln(stderr, "sqmkit serve: --rpm-cert and --rpm-key need --rpm ADDR")
		return 2
	}
	if len(listen) == 0 {
		listen = listFlag{fmt.Sprintf(":%d", bbproto.DefaultPort)}
	}
	cfg.Log = log.New(stderr, "", log.LstdFlags)
	if soft, hard, err := bbserver.RaiseFDLimit(); err != nil {
		cfg.Log.Printf("open file limit: %v (soft %d, hard %d)", err, soft, hard)
	}
	srv := bbserver.New(cfg)
	cfg.Log.Print(srv.Sizing)
	ctx, stop := stopSignals()
	defer stop()

	var wg sync.WaitGroup
	errc := make(chan error, len(listen)+1)
	if *rpmListen != "" {
		serveRPM, err := startRPM(ctx, *rpmListen, *rpmCert, *rpmKey, cfg.Log)
		if err != nil {
			fmt.Fprintln(stderr, "sqmkit serve: --rpm:", err)
			return 1
		}
		wg.Add(1)
		go func() { defer wg.Done(); errc <- serveRPM() }()
	}
	for _, a := range listen {
		host, port := bbproto.SplitHostPort(a)
		addr := net.JoinHostPort(host, port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(stderr, "sqmkit serve:", err)
			return 1
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			fmt.Fprintln(stderr, "sqmkit serve:", err)
			return 1
		}
		cfg.Log.Printf("listening on %s (tcp+udp), %d tests at once, %v and %d bytes per test, %d tests per address per minute",
			ln.Addr(), cfg.MaxTests, cfg.MaxDuration, cfg.MaxBytes, cfg.PerIP)
		wg.Add(1)
		go func() { defer wg.Done(); errc <- srv.Serve(ctx, ln, pc.(*net.UDPConn)) }()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			fmt.Fprintln(stderr, "sqmkit serve:", err)
			return 1
		}
	}
	return 0
}

// checkServe rejects limits that would make the server useless or unsafe,
// where the package would silently substitute its defaults.
func checkServe(c bbserver.Config) error {
	switch {
	case c.MaxTests < 1:
		return fmt.Errorf("--max-tests %d: must be at least 1", c.MaxTests)
	case c.MaxDuration <= 0:
		return fmt.Errorf("--max-duration %v: must be positive", c.MaxDuration)
	case c.MaxBytes <= 0:
		return fmt.Errorf("--max-bytes %d: must be positive", c.MaxBytes)
	case c.PerIP < 1:
		return fmt.Errorf("--per-ip %d: must be at least 1", c.PerIP)
	case c.MaxStreams < 1 || c.MaxStreams > bbproto.MaxStreams:
		return fmt.Errorf("--max-streams %d: must be 1..%d", c.MaxStreams, bbproto.MaxStreams)
	}
	return nil
}
