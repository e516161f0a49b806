package bbserver

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
)

// start runs a server on loopback and returns its TCP and UDP addresses.
func start(t *testing.T, cfg Config) (*Server, string, *net.UDPAddr) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln, pc); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, ln.Addr().String(), pc.LocalAddr().(*net.UDPAddr)
}

func hello(d time.Duration, streams int) bbproto.Hello {
	return bbproto.Hello{Version: bbproto.Version, Duration: int64(d), Streams: streams, ProbeInterval: 10e6}
}

// open sends h on a new control connection and returns the answer.
func open(t *testing.T, addr string, h bbproto.Hello) (net.Conn, bbproto.Accept, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := bbproto.WriteMsg(c, bbproto.MsgHello, h); err != nil {
		t.Fatal(err)
	}
	typ, body, err := bbproto.ReadMsg(c)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	if typ == bbproto.MsgRefuse {
		var r bbproto.Refuse
		bbproto.Decode(body, &r)
		return c, bbproto.Accept{}, r.Reason
	}
	var a bbproto.Accept
	if err := bbproto.Decode(body, &a); err != nil {
		t.Fatal(err)
	}
	return c, a, ""
}

func TestRefusals(t *testing.T) {
	_, addr, _ := start(t, Config{Token: "sesame", PerIP: 2, MaxTests: 10, MaxDuration: time.Minute, MaxStreams: 8})
	withToken := func(h bbproto.Hello, tok string) bbproto.Hello { h.Token = tok; return h }
	for _, c := range []struct {
		name string
		h    bbproto.Hello
		want string
	}{
		{"no token", hello(time.Second, 1), "token"},
		{"wrong token", withToken(hello(time.Second, 1), "sesamE"), "token"},
		{"too long", withToken(hello(2*time.Minute, 1), "sesame"), "limit of 1m0s"},
		{"too many streams", withToken(hello(time.Second, 9), "sesame"), "limit of 8"},
		{"first ok", withToken(hello(time.Minute, 1), "sesame"), ""},
		{"second ok", withToken(hello(time.Minute, 1), "sesame"), ""},
		{"third from the same address", withToken(hello(time.Minute, 1), "sesame"), "rate limit"},
	} {
		_, _, reason := open(t, addr, c.h)
		if (c.want == "") != (reason == "") || !strings.Contains(reason, c.want) {
			t.Errorf("%s: refusal %q, want one containing %q", c.name, reason, c.want)
		}
	}
}

func TestBusy(t *testing.T) {
	_, addr, _ := start(t, Config{MaxTests: 1})
	if _, _, r := open(t, addr, hello(time.Minute, 1)); r != "" {
		t.Fatalf("first test refused: %s", r)
	}
	if _, _, r := open(t, addr, hello(time.Minute, 1)); !strings.Contains(r, "busy") {
		t.Fatalf("second concurrent test: %q, want busy", r)
	}
}

// TestGarbage sends what a scanner would: the server must hang up without
// answering anything it cannot parse.
func TestGarbage(t *testing.T) {
	_, addr, _ := start(t, Config{})
	for name, b := range map[string][]byte{
		"http":            []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"hello not json":  {byte(bbproto.MsgHello), 0, 3, 'a', 'b', 'c'},
		"done first":      {byte(bbproto.MsgHello), 0, 2, '[', ']'},
		"unknown session": func() []byte { h := bbproto.StreamHeader{Kind: bbproto.Download}.Marshal(); return h[:] }(),
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		got, err := io.ReadAll(c)
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: server kept the connection open", name)
		}
		if len(got) > 0 && got[0] != byte(bbproto.MsgRefuse) {
			t.Errorf("%s: server answered %q", name, got)
		}
	}
}

func probe(t *testing.T, c *net.UDPConn, b []byte) (int, bool) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	return n, err == nil
}

// TestProbeAmplification: replies go only to live sessions, from the
// address that opened them, and are never larger than the request.
func TestProbeAmplification(t *testing.T) {
	_, addr, uaddr := start(t, Config{})
	_, acc, r := open(t, addr, hello(time.Minute, 0))
	if r != "" {
		t.Fatal(r)
	}
	c, err := net.DialUDP("udp", nil, uaddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := func(size int, sess bbproto.SessionID) []byte {
		b := make([]byte, size)
		(&bbproto.Probe{Session: sess, Seq: 1}).Marshal(b[:min(size, bbproto.ProbeMaxSize)])
		return b
	}
	for _, c2 := range []struct {
		name  string
		b     []byte
		reply bool
	}{
		{"minimal", req(bbproto.ProbeMinSize, acc.Session), true},
		{"default", req(bbproto.ProbeDefaultSize, acc.Session), true},
		{"largest", req(bbproto.ProbeMaxSize, acc.Session), true},
		{"oversized", req(bbproto.ProbeMaxSize+1, acc.Session), false},
		{"truncated", req(bbproto.ProbeMinSize, acc.Session)[:bbproto.ProbeMinSize-1], false},
		{"unknown session", req(bbproto.ProbeDefaultSize, bbproto.SessionID{1}), false},
		{"garbage", []byte(strings.Repeat("x", 64)), false},
	} {
		n, got := probe(t, c, c2.b)
		if got != c2.reply {
			t.Errorf("%s (%d bytes): reply %v, want %v", c2.name, len(c2.b), got, c2.reply)
		}
		if got && n > len(c2.b) {
			t.Errorf("%s: %d-byte reply to a %d-byte request", c2.name, n, len(c2.b))
		}
	}
	// A reply sent back at the server is not answered (no loops between
	// two servers).
	b := req(bbproto.ProbeDefaultSize, acc.Session)
	bbproto.MakeReply(b, 1, 2)
	if _, got := probe(t, c, b); got {
		t.Error("server answered a reply")
	}
}

// TestStalledReader opens download streams and never reads them: the
// server must drop them within its stall timeout and release everything.
func TestStalledReader(t *testing.T) {
	srv, addr, _ := start(t, Config{Stall: time.Second})
	time.Sleep(100 * time.Millisecond) // let Serve start its goroutines
	base := runtime.NumGoroutine()
	ctl, acc, r := open(t, addr, hello(time.Minute, 4))
	if r != "" {
		t.Fatal(r)
	}
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A tiny receive window makes the server's writes block soon.
		c.(*net.TCPConn).SetReadBuffer(4096)
		h := bbproto.StreamHeader{Kind: bbproto.Download, Session: acc.Session}.Marshal()
		c.Write(h[:])
		conns = append(conns, c)
	}
	ss := srv.lookup(acc.Session, netip.MustParseAddr("127.0.0.1"))
	waitFor(t, 2*time.Second, "streams to open", func() bool { return ss.streams[bbproto.Download].Load() == 4 })
	waitFor(t, 5*time.Second, "stalled streams to be dropped", func() bool { return ss.streams[bbproto.Download].Load() == 0 })
	ctl.Close()
	waitFor(t, 5*time.Second, "goroutines to return", func() bool { return runtime.NumGoroutine() <= base })
	if t.Failed() {
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
	if sent := ss.sent.Load(); sent > 8<<20 {
		t.Errorf("server pushed %d bytes into streams nobody read", sent)
	}
}

// TestByteBudget: a test ends when it has moved its byte budget, and the
// report says why.
func TestByteBudget(t *testing.T) {
	_, addr, _ := start(t, Config{MaxBytes: 1 << 20})
	ctl, acc, r := open(t, addr, hello(time.Minute, 1))
	if r != "" {
		t.Fatal(r)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := bbproto.StreamHeader{Kind: bbproto.Download, Session: acc.Session}.Marshal()
	c.Write(h[:])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if n < 1<<20 || n > 2<<20 {
		t.Errorf("stream moved %d bytes with a 1 MiB budget", n)
	}
	ctl.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, body, err := bbproto.ReadMsg(ctl)
	var rep bbproto.Report
	if err != nil || typ != bbproto.MsgReport || bbproto.Decode(body, &rep) != nil || !strings.Contains(rep.Ended, "budget") {
		t.Fatalf("report: %v %v %+v", typ, err, rep)
	}
}

// TestDeadlineReports: a client whose Done never comes (queued behind a
// bloated upload) still gets the report when the session's time is up,
// saying so.
func TestDeadlineReports(t *testing.T) {
	_, addr, _ := start(t, Config{Grace: time.Second})
	ctl, _, r := open(t, addr, hello(100*time.Millisecond, 1))
	if r != "" {
		t.Fatal(r)
	}
	ctl.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, body, err := bbproto.ReadMsg(ctl)
	var rep bbproto.Report
	if err != nil || typ != bbproto.MsgReport || bbproto.Decode(body, &rep) != nil || rep.Ended != bbproto.EndedDuration {
		t.Fatalf("report: %v %v %+v", typ, err, rep)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Errorf("timed out after %v waiting for %s", d, what)
}

// TestSilentFlood: connections that never say anything are capped, so a
// flood of them cannot pile up goroutines; extra ones are closed at once.
func TestSilentFlood(t *testing.T) {
	_, addr, _ := start(t, Config{})
	for i := range maxPending {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Skipf("connection %d: %v", i, err)
		}
		defer c.Close()
	}
	time.Sleep(200 * time.Millisecond) // let the server take its slots
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection beyond the pending limit: read %v, want EOF (closed at once)", err)
	}
}

// dialFrom connects to addr from a chosen loopback source address.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// One client's idle sockets take its own slots, not everybody's: 300 idle
// connections from 127.0.0.1 leave 127.0.0.2's hello answered at once.
func TestIdleSocketsPerClient(t *testing.T) {
	logs := &syncWriter{}
	_, addr, _ := start(t, Config{FDLimit: 4096, Log: log.New(logs, "", 0)})
	for range 300 {
		dialFrom(t, "127.0.0.1", addr)
	}
	time.Sleep(100 * time.Millisecond)
	c := dialFrom(t, "127.0.0.2", addr)
	// answered before the idle sockets' helloTimeout frees their slots: a
	// hello queued behind them would wait that long, whatever the host's load
	c.SetDeadline(time.Now().Add(helloTimeout * 3 / 4))
	t0 := time.Now()
	if err := bbproto.WriteMsg(c, bbproto.MsgHello, hello(time.Second, 1)); err != nil {
		t.Fatal(err)
	}
	typ, _, err := bbproto.ReadMsg(c)
	if err != nil || typ != bbproto.MsgAccept {
		t.Fatalf("hello from another client: type %d, %v after %v", typ, err, time.Since(t0))
	}
	waitFor(t, 2*time.Second, "a log line saying the limit bit", func() bool {
		return strings.Contains(logs.String(), "127.0.0.1/32 holds 16 unidentified connections, the limit per client")
	})
}

// A client that guesses tokens is refused unread after five wrong ones;
// another client with the right token is not affected.
func TestTokenGuessing(t *testing.T) {
	_, addr, _ := start(t, Config{Token: "sesame", PerIP: 100})
	guess := hello(time.Second, 1)
	for i := range 20 {
		guess.Token = fmt.Sprintf("guess%d", i)
		_, _, reason := open(t, addr, guess)
		want := "wrong or missing token"
		if i >= maxBadTokens {
			want = "5 wrong tokens from 127.0.0.1/32 within a minute; wait a minute"
		}
		if !strings.Contains(reason, want) {
			t.Fatalf("guess %d: %q, want %q", i, reason, want)
		}
	}
	// even the right token waits out the minute from that client
	guess.Token = "sesame"
	if _, _, reason := open(t, addr, guess); !strings.Contains(reason, "wait a minute") {
		t.Errorf("right token from the guessing client: %q", reason)
	}
	c := dialFrom(t, "127.0.0.3", addr)
	c.SetDeadline(time.Now().Add(2 * time.Second))
	bbproto.WriteMsg(c, bbproto.MsgHello, guess)
	if typ, _, err := bbproto.ReadMsg(c); err != nil || typ != bbproto.MsgAccept {
		t.Errorf("another client with the token: type %d, %v", typ, err)
	}
}

// The largest report the protocol promises reaches the client: a 450 s
// test at 1 ms probes (the client ends it early; the bitmap is sized by
// the announced duration).
func TestLongTestReport(t *testing.T) {
	_, addr, _ := start(t, Config{MaxDuration: 500 * time.Second})
	h := hello(450*time.Second, 1)
	h.ProbeInterval = bbproto.MinProbeInterval
	c, acc, reason := open(t, addr, h)
	if reason != "" {
		t.Fatal(reason)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := bbproto.WriteMsg(c, bbproto.MsgDone, bbproto.Done{}); err != nil {
		t.Fatal(err)
	}
	typ, body, err := bbproto.ReadMsg(c)
	var rep bbproto.Report
	if err == nil {
		err = bbproto.Decode(body, &rep)
	}
	if err != nil || typ != bbproto.MsgReport || len(rep.Received) != (h.ProbeSlots()+7)/8 || len(body) < 65533 {
		t.Fatalf("report of session %s: type %d, %d bytes, %v", acc.Session, typ, len(body), err)
	}
}

// Accept failing with EMFILE is waited out, not fatal.
func TestAcceptEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{}
	s := New(Config{Log: log.New(logs, "", 0)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, &emfileListener{Listener: ln, fail: 5}, pc) }()
	c, _, reason := open(t, ln.Addr().String(), hello(time.Second, 1))
	if reason != "" || c == nil {
		t.Fatalf("after EMFILE: %q", reason)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "too many open files; retrying") {
		t.Errorf("log:\n%s", logs)
	}
}

// FDLimit sizes the caps so admitted tests fit.
func TestFitToFDLimit(t *testing.T) {
	s := New(Config{FDLimit: 200})
	if s.cfg.MaxTests*(1+4*s.cfg.MaxStreams)+s.pending.Total > 200-fdReserve || s.cfg.MaxTests < 1 {
		t.Errorf("%d tests × %d streams + %d pending exceed 200 fds", s.cfg.MaxTests, s.cfg.MaxStreams, s.pending.Total)
	}
	if !strings.Contains(s.Sizing, "open file limit 200: at most 1 tests at once") {
		t.Errorf("sizing: %s", s.Sizing)
	}
	if big := New(Config{FDLimit: 1 << 20}); big.cfg.MaxTests != DefaultMaxTests || big.pending.Total != maxPending {
		t.Errorf("a high limit changed the defaults: %s", big.Sizing)
	}
}

type emfileListener struct {
	net.Listener
	fail int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fail > 0 {
		l.fail--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// syncWriter is a log destination tests can read while the server writes.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAdmitRunningClient: with the pending pool full of idle sockets from
// as many addresses as it has slots (none can be displaced), a client
// whose test runs still gets its streams: they come from its test's
// descriptors, not the pool; a client with no test is closed at once.
func TestAdmitRunningClient(t *testing.T) {
	s, addr, _ := start(t, Config{FDLimit: 100})
	_, acc, r := open(t, addr, hello(time.Minute, 2))
	if r != "" {
		t.Fatal(r)
	}
	for i := range s.pending.Total {
		dialFrom(t, fmt.Sprintf("127.0.0.%d", 10+i), addr)
	}
	waitFor(t, 2*time.Second, "the pending pool full", func() bool { return s.pending.Held() == s.pending.Total })
	stranger := dialFrom(t, "127.0.0.2", addr)
	stranger.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := stranger.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a client without a test, pool full: read %v, want EOF (closed at once)", err)
	}
	for i := range 2 {
		c := dialFrom(t, "127.0.0.1", addr)
		h := bbproto.StreamHeader{Kind: bbproto.Download, Session: acc.Session}.Marshal()
		c.Write(h[:])
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
			t.Errorf("stream %d of the running test, pool full: %d bytes, %v", i, n, err)
		}
	}
}
