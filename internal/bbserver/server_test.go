package bbserver

import (
	"context"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
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
