package http1

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a TLS HTTP/1.1 test server with the answers the client must
// read: a sized body, a chunked one, one ended by Connection: close, an
// endless one, a header line over maxLine, and a POST sink; conns counts
// the TCP connections it accepted.
func server(t *testing.T) (*httptest.Server, *url.URL, *tls.Config, *atomic.Int64) {
	var conns atomic.Int64
	var uploaded atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("x")) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, _ *http.Request) {
		for range 3 {
			w.Write(bytes.Repeat([]byte("c"), 1000))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		w.Write([]byte("bye"))
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/hostile", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Long", strings.Repeat("a", 2*maxLine))
	})
	mux.HandleFunc("/up", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		uploaded.Store(n)
		w.Header().Set("X-Got", "1")
	})
	mux.HandleFunc("/missing", http.NotFound)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.MaxHeaderBytes = 1 << 20
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	t.Cleanup(func() {
		if uploaded.Load() != 0 && uploaded.Load() != 5<<20 {
			t.Errorf("server got %d bytes uploaded, want %d", uploaded.Load(), 5<<20)
		}
	})
	return srv, u, &tls.Config{RootCAs: pool}, &conns
}

// dialed is a connection to a fresh server, closed when t ends, with the
// server's URL and the TLS configuration that trusts it.
func dialed(t *testing.T) (*Conn, *url.URL, *tls.Config) {
	_, u, cfg, _ := server(t)
	c, err := Dial(context.Background(), u, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, u, cfg
}

// TestRequests: sized, chunked and close-ended bodies are read whole, a
// 404 is a status not an error, and requests follow one another on one
// connection until the server closes it.
func TestRequests(t *testing.T) {
	_, u, cfg, conns := server(t)
	ctx := context.Background()
	c, err := Dial(ctx, u, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.TCP <= 0 || c.TLS <= 0 || c.Version < tls.VersionTLS12 || c.Addr != u.Host {
		t.Errorf("timing %+v", c.Timing)
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/small", 200, "x"},
		{"/chunked", 200, strings.Repeat("c", 3000)},
		{"/missing", 404, "404 page not found\n"},
		{"/small", 200, "x"},
		{"/close", 200, "bye"},
	} {
		var b bytes.Buffer
		code, err := c.Get(ctx, tc.path, &b)
		if err != nil || code != tc.code || b.String() != tc.body {
			t.Errorf("GET %s: %d %v, body %d bytes %.20q; want %d, %d bytes", tc.path, code, err, b.Len(), b.String(), tc.code, len(tc.body))
		}
	}
	if c.Reusable() {
		t.Error("reusable after Connection: close")
	}
	if _, err := c.Get(ctx, "/small", io.Discard); err == nil {
		t.Error("a request after Connection: close was sent")
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for five requests, want 1", n)
	}
}

// TestPost: a POST sends its whole body, counted as it goes, and the
// connection carries the next request; also with TLS's writes one TCP
// segment per packet (sockopt.Segmented, whose packets TestWriteSegments
// captures).
func TestPost(t *testing.T) {
	for _, segments := range []bool{false, true} {
		_, u, cfg, _ := server(t)
		c, err := Dial(context.Background(), u, cfg, segments)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var sent int64
		code, err := c.Post(context.Background(), "/up", 5<<20, func(n int) { sent += int64(n) })
		if err != nil || code != 200 || sent != 5<<20 {
			t.Fatalf("segments %v: POST: %d %v, %d sent", segments, code, err, sent)
		}
		if code, err := c.Get(context.Background(), "/small", io.Discard); err != nil || code != 200 {
			t.Errorf("segments %v: GET after POST: %d %v", segments, code, err)
		}
	}
}

// TestCancel: an endless body ends when ctx does, and the connection is
// not used again.
func TestCancel(t *testing.T) {
	c, _, _ := dialed(t)
	ctx, cancel := context.WithCancel(context.Background())
	var got atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	var gerr error
	go func() {
		defer wg.Done()
		_, gerr = c.Get(ctx, "/endless", writerFunc(func(p []byte) { got.Add(int64(len(p))) }))
	}()
	for got.Load() < 1<<20 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !errors.Is(gerr, context.Canceled) || c.Reusable() {
		t.Errorf("cancelled GET: %v, reusable %v", gerr, c.Reusable())
	}
}

// TestHostile: a header line over maxLine and a certificate nobody vouched
// for are errors, not buffers or trust.
func TestHostile(t *testing.T) {
	c, u, cfg := dialed(t)
	if _, err := c.Get(context.Background(), "/hostile", io.Discard); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long header: %v", err)
	}
	_, err := Dial(context.Background(), u, &tls.Config{RootCAs: x509.NewCertPool()}, false)
	if !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("unknown authority: %v", err)
	}
	if _, err := Dial(context.Background(), &url.URL{Scheme: "http", Host: u.Host}, cfg, false); err == nil {
		t.Error("plain http was spoken")
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
