// Package bbclient is the client side of sqmkit's bufferbloat test: it runs
// the phases against a bbserver, probes latency throughout, and turns what
// it saw into a bbresult.Result with statistics and grades.
package bbclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// Config describes one test. Zero durations skip a phase.
type Config struct {
	Server  string // host, host:port, [v6]:port
	Network string // "tcp" (either family), "tcp4" or "tcp6"
	Token   string

	Idle     time.Duration // each of the two idle phases
	Download time.Duration
	Upload   time.Duration
	Bidir    time.Duration
	Streams  int // per loaded direction

	ProbeInterval time.Duration
	Tool          string // "sqmkit <version>", recorded in the result

	// OneSegment makes the upload streams hand the kernel one TCP segment
	// per packet (sockopt.WriteSegments), as a router forwards its clients'
	// packets; tune sets it on a router whose upload line is slow.
	OneSegment bool

	// Progress, when set, is called about four times a second.
	Progress func(Progress)
	// Log gets one line per decision (address used, phase changes).
	Log func(string)
}

// Defaults, chosen to match what users compare against: web tests run
// each direction for about 10 s, which is long enough for TCP to fill any
// buffer up to several seconds deep at broadband rates, and RRUL runs the
// same 4 streams each way.
const (
	DefaultIdle          = 5 * time.Second
	DefaultLoad          = 10 * time.Second
	DefaultStreams       = 4
	DefaultProbeInterval = 10 * time.Millisecond
)

// Progress is a snapshot for a live display.
type Progress struct {
	Phase    string
	Elapsed  time.Duration // since the test started
	Total    time.Duration // of all phases
	DownMbps float64       // over the last quarter second
	UpMbps   float64
	RTT      float64 // median probe RTT over the last quarter second, ms; 0 if none
}

// Check validates c, naming the flag to fix.
func (c Config) Check() error {
	switch {
	case c.Server == "":
		return errors.New("no server given: sqmkit test HOST[:PORT]")
	case c.Idle < 0 || c.Download < 0 || c.Upload < 0 || c.Bidir < 0:
		return errors.New("phase durations must not be negative (--idle/--download/--upload/--bidir)")
	case c.Download+c.Upload+c.Bidir+c.Idle == 0:
		return errors.New("every phase is 0 s: nothing to measure")
	case (c.Download > 0 || c.Upload > 0 || c.Bidir > 0) && (c.Streams < 1 || c.Streams > bbproto.MaxStreams):
		return fmt.Errorf("--streams %d out of range 1..%d", c.Streams, bbproto.MaxStreams)
	case c.ProbeInterval < bbproto.MinProbeInterval:
		return fmt.Errorf("--probe-interval %v is below %v", c.ProbeInterval, time.Duration(bbproto.MinProbeInterval))
	}
	return nil
}

// tester is the state of one running test.
type tester struct {
	cfg   Config
	start time.Time
	wall0 int64
	addr  netip.AddrPort
	sess  bbproto.SessionID
	// Bytes each download and upload stream moved (counts). A
	// direction's total is their sum, so the per-stream goodput always
	// adds up to it.
	downS, upS *counts

	mu     sync.Mutex
	inflow []bbresult.InFlow
	phase  string
	total  time.Duration // of all phases
	failed []error       // of streams, in the order they failed

	probes *prober
	// clock reads the time; nil is time.Now. A test makes it return a
	// reading and then stall, as a goroutine the scheduler pauses does.
	clock func() time.Time
}

// read takes one clock reading. Every time the test records is derived
// from one reading: two reads around a pause differ by the pause.
func (t *tester) read() time.Time {
	if t.clock != nil {
		return t.clock()
	}
	return time.Now()
}

// since is a reading as ns on the test's monotonic clock since its start.
func (t *tester) since(n time.Time) int64 { return int64(n.Sub(t.start)) }

func (t *tester) now() int64 { return t.since(t.read()) }

func (t *tester) log(format string, a ...any) {
	if t.cfg.Log != nil {
		t.cfg.Log(fmt.Sprintf(format, a...))
	}
}

// Run runs the test and returns its result. ctx cancels it.
func Run(ctx context.Context, cfg Config) (*bbresult.Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	t := &tester{cfg: cfg, downS: newCounts(max(cfg.Streams, 0)), upS: newCounts(max(cfg.Streams, 0))}
	phases := cfg.phases()
	for _, p := range phases {
		t.total += time.Duration(p.end * 1e9)
	}
	// Slack for stream setup and for late probe replies (see drain).
	hello := bbproto.Hello{Version: bbproto.Version, Token: cfg.Token, Duration: int64(t.total + 5*time.Second),
		Streams: cfg.Streams, ProbeInterval: int64(cfg.ProbeInterval)}
	ss, err := Open(ctx, cfg.Server, cfg.Network, hello)
	if err != nil {
		return nil, err
	}
	ctl := ss.Ctl
	defer ctl.Close()
	t.addr, t.sess = ss.Addr, ss.ID
	t.log("testing against %s (%s), session %s", t.addr, family(t.addr), t.sess)
	udps, err := probeSockets(t.addr)
	closeAll := func() {
		for _, c := range udps {
			c.Close()
		}
	}
	defer closeAll()
	if err != nil {
		return nil, err
	}
	t.start = time.Now()
	t.wall0 = t.start.UnixNano()
	t.probes = newProber(t, udps, hello.ProbeSlots())

	// The server speaks on the control connection only once: its report,
	// at the end or as soon as it cuts the test short (duration or byte
	// budget). Reading it all along stops the phases at once instead of
	// loading a server that no longer answers.
	rep := &serverReport{done: make(chan struct{})}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go func() {
		rep.typ, rep.body, rep.err = bbproto.ReadMsg(ctl)
		close(rep.done)
		stopRun()
	}()

	pctx, stopProbes := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); t.probes.send(pctx) }()
	for _, c := range udps {
		bg.Add(1)
		go func() { defer bg.Done(); t.probes.receive(c) }()
	}
	rec := newRecorder(t)
	bg.Add(1)
	go func() { defer bg.Done(); rec.run(pctx) }()

	phases = slices.DeleteFunc(phases, func(p span) bool { return p.end <= 0 })
	var spans []span
	for _, p := range phases {
		if runCtx.Err() != nil {
			break
		}
		spans = append(spans, t.runPhase(runCtx, p.name, time.Duration(p.end*1e9), p.loaded))
	}
	// Replies still in flight are not lost: wait as long as the slowest
	// reply so far took (the queue has drained by now), within reason.
	stopProbes()
	time.Sleep(min(max(2*t.probes.maxRTT(), 200*time.Millisecond), 3*time.Second))
	closeAll()
	bg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	report, err := rep.wait(ctl)
	if err != nil && len(spans) == 0 {
		return nil, fmt.Errorf("reading the server's report: %w", err)
	}
	// a report that never came (the control connection's last exchange
	// lost in a bloated or dead link) leaves the measurement standing,
	// incomplete (TestReportLost)
	return t.result(report, err, ss.Accept.MaxBytes, phases, spans, rec), nil
}

// phases are the test's phases in order, each end its length in seconds.
func (cfg Config) phases() []span {
	return []span{
		{name: bbresult.PhaseIdleBefore, end: cfg.Idle.Seconds()},
		{name: bbresult.PhaseDownload, end: cfg.Download.Seconds(), loaded: true},
		{name: bbresult.PhaseUpload, end: cfg.Upload.Seconds(), loaded: true},
		{name: bbresult.PhaseBidir, end: cfg.Bidir.Seconds(), loaded: true},
		{name: bbresult.PhaseIdleAfter, end: cfg.Idle.Seconds()},
	}
}

// probeSockets opens the probe flows' sockets toward addr, unconnected: a
// server with several addresses may answer from another one than the
// client wrote to, and a connected socket would drop those replies as if
// the path lost them. Replies are matched by session, sequence number and
// echoed send time instead. The sockets opened are returned on error too.
func probeSockets(addr netip.AddrPort) ([]*net.UDPConn, error) {
	udpNet := "udp4"
	if addr.Addr().Is6() {
		udpNet = "udp6"
	}
	var udps []*net.UDPConn
	for range ProbeFlows {
		c, err := net.ListenUDP(udpNet, nil)
		if err != nil {
			return udps, fmt.Errorf("opening the probe sockets: %w", err)
		}
		// Without receive stamps (not Linux) a reply's arrival is when the
		// test read it.
		sockopt.StampReceives(c)
		udps = append(udps, c)
	}
	return udps, nil
}

// serverReport is the server's one message on the control connection.
type serverReport struct {
	typ  bbproto.MsgType
	body []byte
	err  error
	done chan struct{}
}

// wait asks the server for its report, unless it sent it already, and
// decodes it.
func (r *serverReport) wait(ctl net.Conn) (bbproto.Report, error) {
	var report bbproto.Report
	ctl.SetDeadline(time.Now().Add(10 * time.Second))
	select {
	case <-r.done:
	default:
		if err := bbproto.WriteMsg(ctl, bbproto.MsgDone, bbproto.Done{}); err != nil {
			return report, fmt.Errorf("ending the test: %w", err)
		}
		<-r.done
	}
	if r.err != nil {
		return report, r.err
	}
	if r.typ != bbproto.MsgReport {
		return report, fmt.Errorf("message type %d instead of the report", r.typ)
	}
	return report, bbproto.Decode(r.body, &report)
}

// result analyzes what the test recorded beside the server's report.
func (t *tester) result(report bbproto.Report, lost error, maxBytes int64, phases, spans []span, rec *recorder) *bbresult.Result {
	cfg := t.cfg
	res := &bbresult.Result{
		SchemaVersion: bbresult.SchemaVersion,
		Tool:          cfg.Tool,
		Started:       t.start.UTC(),
		Server:        cfg.Server,
		ServerAddr:    t.addr.String(),
		Family:        family(t.addr),
		Streams:       cfg.Streams,
		ProbeInterval: float64(cfg.ProbeInterval) / 1e6,
	}
	rw := &raw{
		wall0:  t.wall0,
		probes: t.probes.records(),
		serverSaw: func(seq uint32) bool {
			i := int(seq / 8)
			return i < len(report.Received) && report.Received[i]&(1<<(seq%8)) != 0
		},
		spans:      spans,
		throughput: rec.samples,
		why: [2]string{fmt.Sprintf("the server at %s delivered no load on the download streams", t.addr),
			fmt.Sprintf("the server at %s took no load from the upload streams", t.addr)},
	}
	t.mu.Lock()
	rw.inflow = slices.Clone(t.inflow)
	failed := slices.Clone(t.failed)
	t.mu.Unlock()
	if report.Ended != "" {
		// Ending the test, the server closed every stream: their EOFs and
		// resets are that end, said once below, not failures.
		failed = slices.DeleteFunc(failed, closedByPeer)
	}
	if len(failed) > 0 {
		res.Incomplete = fmt.Sprintf("%d TCP streams failed; the first: %v", len(failed), failed[0])
		rw.notes = append(rw.notes, res.Incomplete)
	}
	if report.Ended != "" {
		res.Incomplete = endedNote(report.Ended, maxBytes, phases, spans)
		rw.notes = append(rw.notes, res.Incomplete)
	}
	if lost != nil {
		rw.lossEither = true
		res.Incomplete = fmt.Sprintf("the server's report never came (%v): the figures are the client's alone, and which way each lost probe was lost is not known", lost)
		rw.notes = append(rw.notes, res.Incomplete)
	}
	analyze(rw, res)
	return res
}

// dialHint names the likely cause of a failed connection and its fix.
func dialHint(err error, host, port, network string) string {
	var dnsErr *net.DNSError
	var addrErr *net.AddrError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf(" (nothing listens on port %s there: start 'sqmkit serve' on the server, or give its port as HOST:PORT or --port; the default is %d)", port, bbproto.DefaultPort)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Sprintf(" (the name %q does not resolve: check its spelling, or give the server's IP address)", host)
	case errors.As(err, &addrErr) && network != "tcp":
		fam, other := "IPv6", "-4"
		if network == "tcp4" {
			fam, other = "IPv4", "-6"
		}
		return fmt.Sprintf(" (%s has no %s address: drop %s, use %s, or give an %s address)", host, fam, "-"+network[3:], other, fam)
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return " (no route to the server: check this machine's network, or force the other address family with -4/-6)"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return " (no answer in 10 s: a firewall may drop the port, or the server is down)"
	}
	return ""
}

func family(a netip.AddrPort) string {
	if a.Addr().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// runPhase runs one phase: its streams, for its length, then closes them.
func (t *tester) runPhase(ctx context.Context, name string, length time.Duration, loaded bool) span {
	t.mu.Lock()
	t.phase = name
	t.mu.Unlock()
	t.log("phase %s: %v", name, length)
	sp := span{name: name, start: time.Since(t.start).Seconds(), loaded: loaded}
	down0, up0 := sum(t.downS.load()), sum(t.upS.load())

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if loaded {
		n := t.cfg.Streams
		if name == bbresult.PhaseDownload || name == bbresult.PhaseBidir {
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					reopen(sctx, reopenPause, func(ctx context.Context) { t.stream(ctx, bbproto.Download, i) })
				}()
			}
		}
		if name == bbresult.PhaseUpload || name == bbresult.PhaseBidir {
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					reopen(sctx, reopenPause, func(ctx context.Context) { t.stream(ctx, bbproto.Upload, i) })
				}()
			}
		}
	}
	select {
	case <-time.After(length):
	case <-ctx.Done():
	}
	sp.end = time.Since(t.start).Seconds()
	sp.down, sp.up = sum(t.downS.load())-down0, sum(t.upS.load())-up0
	stop()
	wg.Wait()
	return sp
}

// reopen runs a stream until ctx ends, and again pause after it ends
// early: an outage longer than the server's stall limit closes a stream,
// and without a new one the phase's load was gone for good (a recorded
// LTE trace's phase moved nothing after its first long outage). The
// failure is still counted (fail).
func reopen(ctx context.Context, pause time.Duration, stream func(context.Context)) {
	for {
		stream(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// reopenPause: a second, so a server that refuses streams is not hammered.
const reopenPause = time.Second

// fail records a stream error. The first one and the count end up in the
// notes, because a failed stream makes the goodput low.
func (t *tester) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = append(t.failed, err)
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// endedNote says once why the server cut the test short and which of the
// planned phases that leaves incomplete or not run.
func endedNote(ended string, budget int64, planned, ran []span) string {
	why := ended
	switch ended {
	case bbproto.EndedBudget:
		why = "byte budget of " + siBytes(budget) + " reached"
	case bbproto.EndedDuration:
		why = "its time limit for this test reached"
	}
	if len(ran) == 0 {
		return "server ended the test early: " + why + " before the first phase; nothing was measured"
	}
	cut := ran[len(ran)-1].name
	note := fmt.Sprintf("server ended the test early: %s during %s; %s is incomplete", why, cut, cut)
	var skipped []string
	for _, p := range planned[len(ran):] {
		skipped = append(skipped, p.name)
	}
	if len(skipped) > 0 {
		note += " and " + strings.Join(skipped, ", ") + " did not run"
	}
	return note
}

// siBytes writes n in decimal units, as the server's --max-bytes is given.
func siBytes(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'g', 3, 64) + " GB"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'g', 3, 64) + " MB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
