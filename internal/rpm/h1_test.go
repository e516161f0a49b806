//go:build !router

package rpm

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestH1UploadMovedAcrossReconnect: an HTTP/1.1 upload whose server
// closes the connection after each POST counts, between one connection
// and the next, what the closed ones' peers acknowledged: never less than
// before the close (the bytes handed to TLS, which the kernel's count
// exceeds by the TLS records' and the requests' own bytes) and never the
// closed one's count twice.
func TestH1UploadMovedAcrossReconnect(t *testing.T) {
	setUploadSize(t, 256<<10)
	s, err := NewServer(ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close") // each POST on a new connection
			h.ServeHTTP(w, r)
		})
	})
	u := &url.URL{Scheme: "https", Host: addr, Path: pathUpload}
	l := &h1Load{w: &h1{tls: &tls.Config{InsecureSkipVerify: true}, eps: endpoints{Upload: u}}, up: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last int64
	for i := range 3 {
		if err := l.transfer(ctx); err != nil {
			t.Fatal(err)
		}
		// the server's close reaches us; what it acknowledged is final
		time.Sleep(50 * time.Millisecond)
		open := l.moved()
		l.retire() // as the next transfer does before it dials
		closed := l.moved()
		if open < last || closed != open || closed <= int64(i+1)*uploadSize {
			t.Errorf("POST %d: moved %d before, %d with the connection open, %d closed: want it to hold across the close, above the %d body bytes",
				i+1, last, open, closed, int64(i+1)*uploadSize)
		}
		last = closed
	}
	l.close()
	if got := l.moved(); got != last {
		t.Errorf("moved after close = %d, want %d", got, last)
	}
}

// setUploadSize makes each HTTP/1.1 upload POST n bytes until t ends.
func setUploadSize(t *testing.T, n int64) {
	old := uploadSize
	uploadSize = n
	t.Cleanup(func() { uploadSize = old })
}
