//go:build !router

// Package rpm speaks the IETF "Responsiveness under Working Conditions"
// test (draft-ietf-ippm-responsiveness), the method behind Apple's
// networkQuality and goresponsiveness: a Server that such clients can test
// against, and Measure, a client that reports round trips per minute (RPM).
package rpm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/sqmkit/sqmkit/internal/connlimit"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// ServerConfig bounds what one server will do, so it is safe to leave
// running on the internet. Zero values take the defaults in brackets.
type ServerConfig struct {
	// Names go into the generated certificate besides localhost, 127.0.0.1
	// and ::1, e.g. the host of the listen address. Unused with CertFile.
	Names []string
	// CertFile and KeyFile are PEM files of a real certificate; both or
	// neither. Without them a self-signed certificate is made at start, so
	// clients need networkQuality -k or sqmkit test --rpm-insecure.
	CertFile, KeyFile string

	MaxConns      int           // open connections in total [256]; more are closed at once
	MaxConnsPerIP int           // open connections from one address [128]
	MaxLoad       int           // concurrent large downloads and uploads [64]; more get 429
	MaxRequest    time.Duration // longest large download or upload [60s]; a test needs ~20 s
	Log           func(string)  // one line per load request and per refusal; nil = silent
}

// Stats count what a server has done since it was made.
type Stats struct {
	BytesDown, BytesUp int64 // body bytes of large downloads and uploads
	RefusedConns       int64 // connections closed for exceeding MaxConns, MaxConnsPerIP or twice the handshake cap
	RefusedLoad        int64 // requests answered 429 for exceeding MaxLoad
	Busy               int64 // requests answered 503 on connections over the client's handshake cap
}

// Server serves the four responsiveness endpoints over HTTP/2 and TLS.
type Server struct {
	cfg     ServerConfig
	cert    tls.Certificate
	handler http.Handler
	load    chan struct{} // one token per running large download or upload

	bytesDown, bytesUp, refusedConns, refusedLoad, busy atomic.Int64
	refusals                                            connlimit.Throttle
}

const (
	// largeSize is the advertised size of the large object: the draft asks
	// for at least 8 GB. Faster links simply fetch it again.
	largeSize int64 = 8 << 30
	// maxStreams caps HTTP/2 streams per connection; a client needs one load
	// stream plus a few probes per connection.
	maxStreams = 100
	// A connection holds one of handshakes' slots from accept until its first
	// request: silent or slow TLS clients get a few slots each, so two
	// addresses of idle sockets cannot lock everybody out of /config. sqmkit's
	// own client keeps at most 8 foreign probes in their handshake, and a load
	// connection or two (ForeignWithinServerCap). A client over its cap gets
	// as many again answered 503 with Retry-After, the HTTP answer of an
	// overloaded server, rather than a closed socket; beyond those, closed.
	maxHandshakes       = 128
	handshakesPerClient = 16
)

// chunk is the large object's content, written again and again: the
// content is irrelevant and reusing one buffer keeps memory flat.
var chunk [64 << 10]byte

// NewServer checks cfg and prepares the certificate.
func NewServer(cfg ServerConfig) (*Server, error) {
	for _, f := range []struct {
		name string
		v    int
		def  int
	}{{"MaxConns", cfg.MaxConns, 256}, {"MaxConnsPerIP", cfg.MaxConnsPerIP, 128}, {"MaxLoad", cfg.MaxLoad, 64}} {
		if f.v < 0 {
			return nil, fmt.Errorf("rpm: %s is %d; it must be positive (0 means the default %d)", f.name, f.v, f.def)
		}
	}
	if cfg.MaxRequest < 0 {
		return nil, fmt.Errorf("rpm: MaxRequest is %v; it must be positive (0 means the default 60s)", cfg.MaxRequest)
	}
	cfg.MaxConns = cmp.Or(cfg.MaxConns, 256)
	cfg.MaxConnsPerIP = cmp.Or(cfg.MaxConnsPerIP, 128)
	cfg.MaxLoad = cmp.Or(cfg.MaxLoad, 64)
	cfg.MaxRequest = cmp.Or(cfg.MaxRequest, 60*time.Second)
	if cfg.Log == nil {
		cfg.Log = func(string) {}
	}
	s := &Server{cfg: cfg, load: make(chan struct{}, cfg.MaxLoad), refusals: connlimit.Throttle{Every: time.Second}}
	var err error
	switch {
	case cfg.CertFile == "" && cfg.KeyFile == "":
		s.cert, err = selfSigned(cfg.Names)
	case cfg.CertFile == "" || cfg.KeyFile == "":
		return nil, errors.New("rpm: --cert and --key must be given together")
	default:
		s.cert, err = tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			err = fmt.Errorf("rpm: loading --cert %s / --key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
	}
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathWellKnown, s.serveConfig)
	mux.HandleFunc("GET "+pathConfig, s.serveConfig)
	mux.HandleFunc("GET "+pathSmall, serveSmall)
	mux.HandleFunc("GET "+pathLarge, s.serveLoad("download to", &s.bytesDown, sendLarge))
	mux.HandleFunc("POST "+pathUpload, s.serveLoad("upload from", &s.bytesUp, receiveUpload))
	s.handler = mux
	return s, nil
}

// Fingerprint is the SHA-256 of the certificate, hex, for users who want to
// check a self-signed server out of band.
func (s *Server) Fingerprint() string {
	sum := sha256.Sum256(s.cert.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{s.bytesDown.Load(), s.bytesUp.Load(), s.refusedConns.Load(), s.refusedLoad.Load(), s.busy.Load()}
}

// ListenAndServe listens on the TCP address addr and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("rpm: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve answers TLS connections from ln until ctx ends, then closes ln and
// every connection within a second and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler: s.gate(s.handler),
		// a connection over its client's handshake cap is answered 503
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc := asLimitConn(c); lc != nil && lc.busy {
				return context.WithValue(ctx, busyConn{}, true)
			}
			return ctx
		},
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12},
		// Also the TLS handshake deadline: a client that connects and stalls
		// holds a slot for at most this long.
		ReadHeaderTimeout: 10 * time.Second,
		// Short, because clients may leave every foreign-probe connection
		// open; those would otherwise pile up against MaxConns.
		IdleTimeout:    5 * time.Second,
		MaxHeaderBytes: 16 << 10,
		// Handshake failures from scanners are noise, not decisions.
		ErrorLog: log.New(io.Discard, "", 0),
		// A connection's first request ends its handshake slot.
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				return
			}
			if lc := asLimitConn(c); lc != nil {
				lc.identified()
				// an idle connection (a finished probe the client kept
				// open) is what a client at its cap gives up first
				lc.slot.Idle(st == http.StateIdle)
			}
		},
	}
	// x/net's HTTP/2 server, as net/http's bundled one is only configurable from Go 1.24
	if err := http2.ConfigureServer(srv, &http2.Server{
		MaxConcurrentStreams:         maxStreams,
		MaxUploadBufferPerConnection: 1 << 20,
		MaxUploadBufferPerStream:     1 << 20,
	}); err != nil {
		return fmt.Errorf("rpm: %w", err)
	}
	ll := &limitListener{Listener: ln, s: s,
		conns:      &connlimit.Limiter{Total: s.cfg.MaxConns, PerKey: s.cfg.MaxConnsPerIP, Reclaim: true},
		handshakes: &connlimit.Limiter{Total: maxHandshakes, PerKey: handshakesPerClient},
		overflow:   &connlimit.Limiter{Total: maxHandshakes, PerKey: handshakesPerClient}}
	errc := make(chan error, 1)
	go func() {
		errc <- srv.ServeTLS(ll, "", "")
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("rpm: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		srv.Close()
	}
	<-errc
	return nil
}

func (s *Server) serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Host == "" {
		http.Error(w, "request has no Host", http.StatusBadRequest)
		return
	}
	// The URLs repeat the name the client used to reach us, so they work
	// whether it came by IP, IPv6 literal or DNS name.
	body, err := json.Marshal(newConfigJSON(r.Host))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body)
}

func serveSmall(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", "1")
	w.Write(chunk[:1])
}

// serveLoad runs one large transfer under a load token and a MaxRequest
// deadline, then counts and logs the body bytes it moved.
func (s *Server) serveLoad(what string, moved *atomic.Int64, transfer func(http.ResponseWriter, *http.Request, time.Time) int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.acquire(w, r) {
			return
		}
		defer func() { <-s.load }()
		start := time.Now()
		n := transfer(w, r, start.Add(s.cfg.MaxRequest))
		moved.Add(n)
		s.logLoad(what, r, n, time.Since(start))
	}
}

func sendLarge(w http.ResponseWriter, _ *http.Request, deadline time.Time) int64 {
	// The deadline also frees a handler whose client stopped reading.
	http.NewResponseController(w).SetWriteDeadline(deadline)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(largeSize))
	var n int64
	for n < largeSize {
		m, err := w.Write(chunk[:min(int64(len(chunk)), largeSize-n)])
		n += int64(m)
		if err != nil {
			break
		}
	}
	return n
}

func receiveUpload(w http.ResponseWriter, r *http.Request, deadline time.Time) int64 {
	http.NewResponseController(w).SetReadDeadline(deadline)
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		return n // the client left or hit MaxRequest: nobody to answer
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%d\n", n)
	return n
}

// acquire takes a load token or answers 429 with the Retry-After the
// network-quality server spec asks for.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) bool {
	select {
	case s.load <- struct{}{}:
		return true
	default:
	}
	s.refusedLoad.Add(1)
	s.logRefusal(fmt.Sprintf("rpm: busy: %d load requests running, refused %s %s", s.cfg.MaxLoad, r.URL.Path, hostOf(r.RemoteAddr)))
	w.Header().Set("Retry-After", "10")
	http.Error(w, "too many tests running, retry later", http.StatusTooManyRequests)
	return false
}

func (s *Server) logLoad(what string, r *http.Request, n int64, d time.Duration) {
	s.cfg.Log(fmt.Sprintf("rpm: %s %s: %.1f MB in %.1f s (%.1f Mbit/s)",
		what, hostOf(r.RemoteAddr), float64(n)/1e6, d.Seconds(), float64(n)*8/1e6/max(d.Seconds(), 1e-9)))
}

// logRefusal logs at most once a second, so a flood cannot flood the log.
func (s *Server) logRefusal(line string) {
	if l := s.refusals.Line(line); l != "" {
		s.cfg.Log(l)
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// limitListener closes connections beyond the limits right after accept,
// before any TLS work is spent on them: MaxConns in total and
// MaxConnsPerIP per client (an address, or an IPv6 /64), and, for
// connections that have not sent a request yet, handshakes' smaller caps.
type limitListener struct {
	net.Listener
	s                           *Server
	conns, handshakes, overflow *connlimit.Limiter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a := connlimit.AddrOf(c)
		closeIt := func() { c.Close() }
		slot, _, err := l.conns.TakeSlot(a, "connections", closeIt)
		var handshake func()
		busy := false
		if err == nil {
			if handshake, _, err = l.handshakes.Take(a, "connections in their TLS handshake", closeIt); err != nil {
				handshake, _, err = l.overflow.Take(a, "connections over the handshake cap, answered 503", closeIt)
				busy = true
			}
			if err != nil {
				slot.Release()
			}
		}
		if err != nil {
			// Counted and logged before the close, so a client that sees
			// the close can rely on both.
			l.s.refusedConns.Add(1)
			l.s.logRefusal(fmt.Sprintf("rpm: connection limit: refused %s: %v", a, err))
			c.Close()
			continue
		}
		// A probe answer on a loaded connection must not wait behind what
		// the server queued itself: the server must not be the bloat it
		// measures.
		return &limitConn{Conn: sockopt.Replenish(c), slot: slot, identified: handshake, busy: busy}, nil
	}
}

type limitConn struct {
	net.Conn
	slot       *connlimit.Slot
	identified func() // ends the handshake slot; idempotent
	busy       bool   // over the client's handshake cap: every request is answered 503
}

func asLimitConn(c net.Conn) *limitConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitConn)
	return lc
}

type busyConn struct{}

// gate answers the requests of a connection over its client's handshake
// cap with 503 and Retry-After, as an overloaded server does
// (TestHandshakeCapAnswers503).
func (s *Server) gate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(busyConn{}) == nil {
			h.ServeHTTP(w, r)
			return
		}
		s.busy.Add(1)
		s.logRefusal(fmt.Sprintf("rpm: busy: %s has more than %d connections in their handshake; answered 503", hostOf(r.RemoteAddr), handshakesPerClient))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many new connections from your address at once; retry in a second", http.StatusServiceUnavailable)
	})
}

func (c *limitConn) Close() error {
	c.identified()
	c.slot.Release()
	return c.Conn.Close()
}
