// Package bbserver is the server side of sqmkit's bufferbloat test: it
// answers UDP probes for live sessions, sends and sinks bulk TCP streams, and
// enforces the limits that make it safe to leave running on the internet.
package bbserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/connlimit"
)

// Config holds the server's limits. Zero values take the defaults below.
type Config struct {
	Token       string        // required from clients when non-empty
	MaxTests    int           // concurrent tests (default 20)
	MaxDuration time.Duration // per test (default 120 s)
	MaxBytes    int64         // payload bytes per test, both directions (default 25 GB)
	PerIP       int           // tests started per client address per minute (default 12)
	MaxStreams  int           // per direction per test (default 16)
	// Stall is how long any single read or write may block before the
	// connection is dropped (default 10 s).
	Stall time.Duration
	// Grace is how long after its announced duration a session may live
	// (default DefaultGrace).
	Grace time.Duration
	// FDLimit is how many files the process may open (default: its
	// RLIMIT_NOFILE); the caps are sized so every test they admit fits.
	FDLimit int
	Log     *log.Logger // one line per test and per kind of refusal; nil discards
}

// Defaults for Config's zero values.
const (
	DefaultMaxTests    = 20
	DefaultMaxDuration = 120 * time.Second
	DefaultMaxBytes    = 25e9
	// sqmkit tune runs a short test every 8 s or so (7–8 a minute); twelve
	// leaves it room while a flood from one address stays bounded (each
	// test is capped in time and bytes too).
	DefaultPerIP      = 12
	DefaultMaxStreams = 16
	DefaultStall      = 10 * time.Second
)

// DefaultGrace: after its phases the client still waits up to 3 s for
// late probe replies, and its Done then crosses the upload's queue,
// seconds deep on a bloated or recorded LTE link (5 s left the lab's slow
// recorded uploads without their report).
const DefaultGrace = 15 * time.Second

// helloTimeout bounds how long an accepted connection may take to say who it
// is; a silent connection costs a goroutine and a socket until then. At most
// maxPending of them wait at once, and pendingPerClient from one client (an
// address, or an IPv6 /64), so one client's idle sockets cannot lock out
// everybody else's hellos; more are closed on arrival.
const (
	helloTimeout     = 5 * time.Second
	maxPending       = 256
	pendingPerClient = 16
)

// A client that sends maxBadTokens wrong tokens within a minute is refused
// without a comparison until the minute has passed: guessing a token costs
// a minute per five guesses.
const maxBadTokens = 5

// Server runs tests. One Server can serve several listeners.
type Server struct {
	cfg Config

	mu       sync.RWMutex
	sessions map[bbproto.SessionID]*session
	running  int

	perIP     connlimit.Window     // tests started per client
	badTokens connlimit.Window     // wrong tokens per client
	pending   *connlimit.Limiter   // connections not yet identified
	joining   map[netip.Prefix]int // unidentified connections of clients with a test running (admit)
	refusals  sync.Map             // kind of refusal -> *connlimit.Throttle: a line a second each
	acceptLog connlimit.Throttle
	// Sizing is how the caps were fitted to the file descriptor limit, for
	// the start-up log.
	Sizing string

	// frame is the shared, read-only bulk frame every download stream writes.
	frame []byte
}

// New returns a Server with cfg's limits.
func New(cfg Config) *Server {
	if cfg.MaxTests <= 0 {
		cfg.MaxTests = DefaultMaxTests
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = DefaultMaxDuration
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.PerIP <= 0 {
		cfg.PerIP = DefaultPerIP
	}
	if cfg.MaxStreams <= 0 || cfg.MaxStreams > bbproto.MaxStreams {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Stall <= 0 {
		cfg.Stall = DefaultStall
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	if cfg.FDLimit <= 0 {
		cfg.FDLimit = fdLimit()
	}
	s := &Server{
		cfg:       cfg,
		sessions:  map[bbproto.SessionID]*session{},
		joining:   map[netip.Prefix]int{},
		perIP:     connlimit.Window{Span: time.Minute},
		badTokens: connlimit.Window{Span: time.Minute},
		acceptLog: connlimit.Throttle{Every: 10 * time.Second},
		frame:     bbproto.DataFrame(),
	}
	s.fit()
	return s
}

// refused logs a refusal, at most one line a second of each kind, so a
// flood of one kind neither floods the log nor hides the others.
func (s *Server) refused(kind, format string, a ...any) {
	th, _ := s.refusals.LoadOrStore(kind, &connlimit.Throttle{Every: time.Second})
	if line := th.(*connlimit.Throttle).Line(fmt.Sprintf(format, a...)); line != "" {
		s.cfg.Log.Print(line)
	}
}

// Serve answers on ln (TCP) and pc (UDP) until ctx ends. Both normally share
// one port number.
func (s *Server) Serve(ctx context.Context, ln net.Listener, pc *net.UDPConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
		pc.Close()
	}()
	go s.serveUDP(pc)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			backoff = 0
			// admitted here, not in its goroutine: a flood's refused
			// sockets are closed at once instead of holding descriptors
			// while thousands of goroutines wait to run
			if release, ok := s.admit(c); ok {
				go s.handle(ctx, c, release)
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if !retryable(err) {
			return err
		}
		// Out of file descriptors (or memory) is a state that passes as
		// connections close: wait, longer each time, and keep serving.
		backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
		if line := s.acceptLog.Line(fmt.Sprintf("accept: %v; retrying in %v (%s)", err, backoff, s.Sizing)); line != "" {
			s.cfg.Log.Print(line)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// retryable reports an accept error that passes by itself.
func retryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// session is one running test.
type session struct {
	id         bbproto.SessionID
	peer       netip.Addr
	deadline   time.Time
	ctx        context.Context
	end        context.CancelCauseFunc
	streams    [3]atomic.Int32 // open streams by kind
	maxStreams int
	sent       atomic.Int64
	recv       atomic.Int64
	maxBytes   int64

	pmu      sync.Mutex
	received []byte // bitmap of probe seqs seen

	cmu   sync.Mutex
	conns map[net.Conn]struct{}
}

var (
	errBudget   = errors.New(bbproto.EndedBudget)
	errDuration = errors.New(bbproto.EndedDuration)
	errFinished = errors.New("test finished")
)

// account adds n payload bytes and ends the session when over budget.
func (ss *session) account(ctr *atomic.Int64, n int) bool {
	ctr.Add(int64(n))
	if ss.sent.Load()+ss.recv.Load() > ss.maxBytes {
		ss.end(errBudget)
		return false
	}
	return true
}

func (ss *session) track(c net.Conn) bool {
	ss.cmu.Lock()
	defer ss.cmu.Unlock()
	if ss.ctx.Err() != nil {
		return false
	}
	ss.conns[c] = struct{}{}
	return true
}

func (ss *session) untrack(c net.Conn) {
	ss.cmu.Lock()
	delete(ss.conns, c)
	ss.cmu.Unlock()
}

// closeAll drops every stream of the session; called once when it ends.
func (ss *session) closeAll() {
	ss.cmu.Lock()
	defer ss.cmu.Unlock()
	for c := range ss.conns {
		c.Close()
	}
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// admit reserves what an accepted connection holds until it says what it
// is, or closes it. A client with a test running takes it from that test's
// streams (fit counts their descriptors in the test's), anyone else from
// the pending pool: idle sockets from other addresses then never cost a
// running test a stream (TestServeSoak, TestAdmitRunningClient). release
// may be called more than once.
func (s *Server) admit(c net.Conn) (release func(), ok bool) {
	k := connlimit.Key(connlimit.AddrOf(c))
	s.mu.Lock()
	room := 0
	for _, ss := range s.sessions {
		if connlimit.Key(ss.peer) == k {
			room += 2 * 2 * ss.maxStreams
		}
	}
	if s.joining[k] < room {
		s.joining[k]++
		s.mu.Unlock()
		var once sync.Once
		return func() {
			once.Do(func() {
				s.mu.Lock()
				if s.joining[k]--; s.joining[k] <= 0 {
					delete(s.joining, k)
				}
				s.mu.Unlock()
			})
		}, true
	}
	s.mu.Unlock()
	release, evicted, err := s.pending.Take(connlimit.AddrOf(c), "unidentified connections", func() { c.Close() })
	if err != nil {
		s.refused("pending", "closed a connection from %s: %v", c.RemoteAddr(), err)
		c.Close()
		return nil, false
	}
	if evicted.IsValid() {
		s.refused("evict", "unidentified connections at their limit: closed the oldest of %s, the client holding the most, for %s", evicted, c.RemoteAddr())
	}
	return release, true
}

// handle reads the first bytes of a connection to tell a control connection
// (a control message) from a data stream (a StreamHeader), and dispatches.
func (s *Server) handle(ctx context.Context, c net.Conn, release func()) {
	defer c.Close()
	defer release()
	c.SetDeadline(time.Now().Add(helloTimeout))
	var first [bbproto.StreamHeaderSize]byte
	if _, err := io.ReadFull(c, first[:1]); err != nil {
		return
	}
	if first[0] == byte(bbproto.MsgHello) {
		s.control(ctx, c, first[0], release)
		return
	}
	_, err := io.ReadFull(c, first[1:])
	release()
	if err != nil {
		return
	}
	h, err := bbproto.ParseStreamHeader(first[:])
	if err != nil {
		s.refused("stream", "refused stream from %s: %v", c.RemoteAddr(), err)
		return
	}
	s.stream(c, h)
}

// control runs one test's control connection from Hello to Report.
// release frees the connection's pending slot once the hello is in.
func (s *Server) control(ctx context.Context, c net.Conn, first byte, release func()) {
	start := time.Now()
	peer := tcpPeer(c)
	typ, body, err := bbproto.ReadMsg(io.MultiReader(bytes.NewReader([]byte{first}), c))
	release()
	if err == nil && typ != bbproto.MsgHello {
		err = fmt.Errorf("first message is type %d, want hello", typ)
	}
	var h bbproto.Hello
	if err == nil {
		h, err = bbproto.ParseHello(body)
	}
	if err == nil {
		err = s.check(h, peer)
	}
	if err != nil {
		s.refused("hello", "refused %s: %v", c.RemoteAddr(), err)
		c.SetWriteDeadline(time.Now().Add(s.cfg.Stall))
		bbproto.WriteMsg(c, bbproto.MsgRefuse, bbproto.Refuse{Reason: err.Error()})
		return
	}
	ss := s.open(ctx, h, peer)
	defer s.close(ss)

	acc := bbproto.Accept{Session: ss.id, MaxDuration: int64(s.cfg.MaxDuration), MaxBytes: s.cfg.MaxBytes, MaxStreams: s.cfg.MaxStreams}
	c.SetReadDeadline(time.Time{}) // the hello's is over
	c.SetWriteDeadline(ss.deadline)
	if err := bbproto.WriteMsg(c, bbproto.MsgAccept, acc); err != nil {
		return
	}
	// The control connection stays quiet until Done; its close (or the
	// session deadline) ends the test. One timer, the session's: a read
	// deadline of its own fired a hair before it, and a test whose Done
	// was still queued in a bloated upload got no report
	// (TestDeadlineReports).
	go func() {
		<-ss.ctx.Done()
		c.SetReadDeadline(time.Now())
	}()
	typ, _, err = bbproto.ReadMsg(c)
	ended := ""
	if ss.ctx.Err() != nil {
		ended = context.Cause(ss.ctx).Error()
	}
	result := "ok"
	switch {
	case ended != "":
		result = ended
	case err != nil:
		result = "control: " + err.Error()
	case typ != bbproto.MsgDone:
		result = fmt.Sprintf("control: message type %d, want done", typ)
	}
	ss.end(errFinished)
	ss.closeAll()
	if typ == bbproto.MsgDone || ended != "" {
		ss.pmu.Lock()
		rep := bbproto.Report{Received: ss.received, BytesSent: ss.sent.Load(), BytesRecv: ss.recv.Load(), Ended: ended}
		c.SetWriteDeadline(time.Now().Add(s.cfg.Stall))
		bbproto.WriteMsg(c, bbproto.MsgReport, rep)
		ss.pmu.Unlock()
	}
	s.cfg.Log.Printf("test %s from %s: %.1fs, sent %d B, received %d B, %s",
		ss.id, c.RemoteAddr(), time.Since(start).Seconds(), ss.sent.Load(), ss.recv.Load(), result)
}

// check applies the server's limits to a Hello from peer.
func (s *Server) check(h bbproto.Hello, peer netip.Addr) error {
	now := time.Now()
	if s.cfg.Token != "" {
		if s.badTokens.Count(peer, now) >= maxBadTokens {
			return fmt.Errorf("%d wrong tokens from %s within a minute; wait a minute", maxBadTokens, connlimit.Key(peer))
		}
		if subtle.ConstantTimeCompare([]byte(h.Token), []byte(s.cfg.Token)) != 1 {
			if s.badTokens.Add(peer, now) == maxBadTokens {
				s.cfg.Log.Printf("client %s sent %d wrong tokens within a minute; its hellos are refused unread for a minute", connlimit.Key(peer), maxBadTokens)
			}
			return errors.New("wrong or missing token (--token)")
		}
	}
	if time.Duration(h.Duration) > s.cfg.MaxDuration {
		return fmt.Errorf("test of %v exceeds this server's limit of %v; shorten the phases", time.Duration(h.Duration), s.cfg.MaxDuration)
	}
	if h.Streams > s.cfg.MaxStreams {
		return fmt.Errorf("%d streams exceed this server's limit of %d; lower --streams", h.Streams, s.cfg.MaxStreams)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running >= s.cfg.MaxTests {
		return fmt.Errorf("server busy: %d tests running; try again later", s.running)
	}
	if n := s.perIP.Count(peer, now); n >= s.cfg.PerIP {
		return fmt.Errorf("rate limit: %d tests from %s in the last minute; wait", n, connlimit.Key(peer))
	}
	s.perIP.Add(peer, now)
	s.running++
	return nil
}

func (s *Server) open(ctx context.Context, h bbproto.Hello, peer netip.Addr) *session {
	ss := &session{
		peer:       peer,
		deadline:   time.Now().Add(time.Duration(h.Duration) + s.cfg.Grace),
		maxBytes:   s.cfg.MaxBytes,
		maxStreams: max(h.Streams, 1),
		received:   make([]byte, (h.ProbeSlots()+7)/8),
		conns:      map[net.Conn]struct{}{},
	}
	rand.Read(ss.id[:])
	var cancel context.CancelFunc
	ctx, cancel = context.WithDeadlineCause(ctx, ss.deadline, errDuration)
	ss.ctx, ss.end = context.WithCancelCause(ctx)
	context.AfterFunc(ss.ctx, func() { cancel(); ss.closeAll() })
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	return ss
}

func (s *Server) close(ss *session) {
	ss.end(errFinished)
	s.mu.Lock()
	delete(s.sessions, ss.id)
	s.running--
	s.mu.Unlock()
}

func (s *Server) lookup(id bbproto.SessionID, from netip.Addr) *session {
	s.mu.RLock()
	ss := s.sessions[id]
	s.mu.RUnlock()
	if ss == nil || ss.peer != from || ss.ctx.Err() != nil {
		return nil
	}
	return ss
}
