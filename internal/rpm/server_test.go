//go:build !router

package rpm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startServer serves s on a loopback port until the test ends, optionally
// with its handler wrapped (the tests' hook for adding delay).
func startServer(t testing.TB, s *Server, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	if wrap != nil {
		s.handler = wrap(s.handler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func newTestServer(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, startServer(t, s, nil)
}

// h2Client trusts exactly the server's certificate and speaks only HTTP/2.
func h2Client(t testing.TB, s *Server) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.cert.Leaf)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}}, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestServerEndpoints(t *testing.T) {
	s, addr := newTestServer(t, ServerConfig{})
	c := h2Client(t, s)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
		check        func([]byte) error
	}{
		{"GET", pathWellKnown, 200, "application/json", func(b []byte) error { return checkConfigShape(b, addr) }},
		{"GET", pathConfig, 200, "application/json", func(b []byte) error { return checkConfigShape(b, addr) }},
		{"GET", pathSmall, 200, "application/octet-stream", func(b []byte) error {
			if len(b) != 1 {
				return errors.New("small object is not 1 byte")
			}
			return nil
		}},
		{"POST", pathSmall, 405, "", nil},
		{"GET", pathUpload, 405, "", nil},
		{"GET", "/nope", 404, "", nil},
	} {
		req, _ := http.NewRequest(tc.method, "https://"+addr+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Errorf("%s %s: HTTP/%d, want HTTP/2", tc.method, tc.path, resp.ProtoMajor)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.ctype != "" && resp.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, resp.Header.Get("Content-Type"), tc.ctype)
		}
		if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s %s: Content-Encoding %q; the spec forbids encodings", tc.method, tc.path, resp.Header.Get("Content-Encoding"))
		}
		if tc.check != nil {
			if err := tc.check(body); err != nil {
				t.Errorf("%s %s: %v", tc.method, tc.path, err)
			}
		}
	}
}

// checkConfigShape checks the exact JSON shape networkQuality and the draft
// read: version 1 and both URL name sets pointing back at addr.
func checkConfigShape(b []byte, addr string) error {
	var raw struct {
		Version json.Number       `json:"version"`
		URLs    map[string]string `json:"urls"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Version != "1" {
		return errors.New("version is " + string(raw.Version))
	}
	want := map[string]string{
		"small_https_download_url": pathSmall, "small_download_url": pathSmall,
		"large_https_download_url": pathLarge, "large_download_url": pathLarge,
		"https_upload_url": pathUpload, "upload_url": pathUpload,
	}
	if len(raw.URLs) != len(want) {
		return errors.New("urls has unexpected keys: " + string(b))
	}
	for k, p := range want {
		if raw.URLs[k] != "https://"+addr+p {
			return errors.New(k + " is " + raw.URLs[k])
		}
	}
	_, err := parseConfig(b)
	return err
}

func TestLargeDownloadStreamsWithFlatMemory(t *testing.T) {
	s, addr := newTestServer(t, ServerConfig{})
	resp, err := h2Client(t, s).Get("https://" + addr + pathLarge)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength < 8<<30 {
		t.Errorf("large object is %d bytes, the spec wants at least 8 GB", resp.ContentLength)
	}
	const n = 128 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := io.CopyN(io.Discard, resp.Body, n)
	runtime.ReadMemStats(&after)
	if err != nil || got != n {
		t.Fatalf("read %d bytes: %v", got, err)
	}
	// Client and server share this process; neither may allocate per byte.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > n/8 && !raceEnabled {
		t.Errorf("streaming %d MB allocated %d MB", n>>20, alloc>>20)
	}
}

func TestUploadSinkCountsBytes(t *testing.T) {
	s, addr := newTestServer(t, ServerConfig{})
	const n = 10<<20 + 7
	resp, err := h2Client(t, s).Post("https://"+addr+pathUpload, "application/octet-stream", io.LimitReader(&zeroReader{n: new(atomic.Int64), limit: new(loader).unsent}, n))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "10485767" {
		t.Errorf("upload answer %d %q, want 200 \"10485767\"", resp.StatusCode, body)
	}
	if got := s.Stats().BytesUp; got != n {
		t.Errorf("Stats().BytesUp = %d, want %d", got, n)
	}
}

func TestConnectionLimit(t *testing.T) {
	var logs logSink
	s, addr := newTestServer(t, ServerConfig{MaxConns: 2, Log: logs.add})
	dial := func() (*tls.Conn, error) {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err == nil {
			// A refused connection may still finish the client side of the
			// handshake before it sees the close; reading proves it is served.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err = c.Read(make([]byte, 1)); err != nil {
				c.Close()
			}
		}
		return c, err
	}
	var open []*tls.Conn
	for range 2 {
		c, err := dial()
		if err != nil {
			t.Fatalf("connection within the limit refused: %v", err)
		}
		open = append(open, c)
	}
	if _, err := dial(); err == nil {
		t.Fatal("third connection accepted with MaxConns 2")
	}
	if s.Stats().RefusedConns == 0 {
		t.Error("refusal not counted")
	}
	if !logs.contains("connection limit") {
		t.Errorf("refusal not logged: %q", logs.lines())
	}
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed after a close: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open[1].Close()
}

func TestLoadLimitAnswers429(t *testing.T) {
	s, addr := newTestServer(t, ServerConfig{MaxLoad: 1})
	c := h2Client(t, s)
	first, err := c.Get("https://" + addr + pathLarge)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if _, err := io.CopyN(io.Discard, first.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, req := range []func() (*http.Response, error){
		func() (*http.Response, error) { return c.Get("https://" + addr + pathLarge) },
		func() (*http.Response, error) {
			return c.Post("https://"+addr+pathUpload, "application/octet-stream", bytes.NewReader(nil))
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("second load request: %s, Retry-After %q; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	if got := s.Stats().RefusedLoad; got != 2 {
		t.Errorf("RefusedLoad = %d, want 2", got)
	}
	// Probes stay available while the load slots are full.
	resp, err := c.Get("https://" + addr + pathSmall)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("small object while busy: %v %v", resp, err)
	}
}

func TestMaxRequestCutsDownload(t *testing.T) {
	var logs logSink
	s, addr := newTestServer(t, ServerConfig{MaxRequest: 300 * time.Millisecond, Log: logs.add})
	resp, err := h2Client(t, s).Get("https://" + addr + pathLarge)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Fatalf("download ended cleanly after %d bytes; a cut must look like an error", n)
	}
	if n >= 8<<30 {
		t.Fatalf("download not cut: %d bytes", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !logs.contains("download to 127.0.0.1") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !logs.contains("download to 127.0.0.1") {
		t.Errorf("no log line for the cut download: %q", logs.lines())
	}
}

func TestNewServerConfig(t *testing.T) {
	dir := t.TempDir()
	gen, err := selfSigned([]string{"router.lan", "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gen.Leaf.DNSNames, "router.lan") || !slices.Contains(gen.Leaf.DNSNames, "localhost") || len(gen.Leaf.IPAddresses) != 3 {
		t.Errorf("certificate names %v %v, want router.lan, localhost, 192.0.2.1, 127.0.0.1, ::1", gen.Leaf.DNSNames, gen.Leaf.IPAddresses)
	}
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	keyDER, err := x509.MarshalPKCS8PrivateKey(gen.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gen.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)

	loaded, err := NewServer(ServerConfig{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	own := &Server{cert: gen}
	if loaded.Fingerprint() != own.Fingerprint() || len(loaded.Fingerprint()) != 64 {
		t.Errorf("loaded certificate fingerprint %s, want %s", loaded.Fingerprint(), own.Fingerprint())
	}
	for _, tc := range []struct {
		cfg ServerConfig
		err string
	}{
		{ServerConfig{CertFile: certFile}, "--cert and --key"},
		{ServerConfig{CertFile: certFile, KeyFile: filepath.Join(dir, "missing.pem")}, "missing.pem"},
		{ServerConfig{MaxConns: -1}, "MaxConns"},
		{ServerConfig{MaxLoad: -5}, "MaxLoad"},
		{ServerConfig{MaxRequest: -time.Second}, "MaxRequest"},
	} {
		if _, err := NewServer(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("NewServer(%+v) error %v, want one naming %q", tc.cfg, err, tc.err)
		}
	}
}

func BenchmarkLargeDownload(b *testing.B) {
	s, err := NewServer(ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	addr := startServer(b, s, nil)
	resp, err := h2Client(b, s).Get("https://" + addr + pathLarge)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	const chunkSize = 1 << 20
	b.SetBytes(chunkSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := io.CopyN(io.Discard, resp.Body, chunkSize); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallObject is the floor of a self probe: one 1-byte GET on an
// idle HTTP/2 connection over loopback.
func BenchmarkSmallObject(b *testing.B) {
	s, err := NewServer(ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	addr := startServer(b, s, nil)
	c := h2Client(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := c.Get("https://" + addr + pathSmall)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// Idle TCP sockets that never start TLS, from two addresses, take only
// their own handshake slots: /config stays open to everybody else.
func TestIdleSocketsDoNotBlockConfig(t *testing.T) {
	var logs logSink
	_, addr := newTestServer(t, ServerConfig{Log: logs.add})
	for _, src := range []string{"127.0.0.1", "127.0.0.2"} {
		for range 128 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
	}
	time.Sleep(200 * time.Millisecond)
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext,
	}}
	resp, err := client.Get("https://" + addr + pathConfig)
	if err != nil {
		t.Fatalf("/config from a third address: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/config: %s", resp.Status)
	}
	if !logs.contains("127.0.0.1/32 holds 16 connections over the handshake cap, answered 503") {
		t.Errorf("the handshake cap was not logged: %q", logs.lines())
	}
}

// A client over its cap of connections in their handshake is answered 503
// with Retry-After, an overloaded server's HTTP answer, not a closed socket;
// twice the cap, and the socket is closed.
func TestHandshakeCapAnswers503(t *testing.T) {
	var logs logSink
	s, addr := newTestServer(t, ServerConfig{Log: logs.add})
	idle := func(n int) {
		for range n {
			c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}).Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.cert.Leaf)
	get := func() (*http.Response, error) {
		tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}},
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}).DialContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Timeout: 3 * time.Second, Transport: tr}).Get("https://" + addr + pathSmall)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	idle(handshakesPerClient)
	resp, err := get()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the handshake cap: %v %v, want 503 with Retry-After", resp, err)
	}
	if s.Stats().Busy == 0 || !logs.contains("answered 503") {
		t.Errorf("the 503 was not counted or logged: %+v %q", s.Stats(), logs.lines())
	}
	idle(handshakesPerClient)
	if _, err := get(); err == nil {
		t.Error("at twice the handshake cap a connection was still served")
	}
}
