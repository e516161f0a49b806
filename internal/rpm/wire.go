package rpm

// How RunPhases reaches a responsiveness server: HTTP/2 (the draft's
// protocol; the full build) or HTTP/1.1 (the router build, whose binary
// has no room for net/http: docs/design.md, "The router's way to public
// servers").

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// wire is one protocol to a server.
type wire interface {
	fetchConfig(ctx context.Context, cfgURL string) (endpoints, error)
	// foreign times a new connection and a 1-byte GET on it.
	foreign(ctx context.Context) (foreignTimes, error)
	newLoad(up bool) load
	// multiplexed: a GET can share a load connection (self probes).
	multiplexed() bool
}

// load is one load-generating connection.
type load interface {
	// transfer moves one object (a large GET, or a POST up); nil when it
	// ended and another may follow on the same connection.
	transfer(ctx context.Context) error
	moved() int64 // goodput so far, in bytes
	ready() bool  // connected, so a self probe can share it
	// self times a 1-byte GET on this connection; reused is false when the
	// GET had to open a new one.
	self(ctx context.Context) (d time.Duration, reused bool, err error)
	close()
}

// foreignTimes are one foreign probe's: when its TCP handshake began,
// that handshake (one round trip), the TLS handshake per round trip, and
// the GET; Addr is the server's address it reached.
type foreignTimes struct {
	Start          time.Time
	TCP, TLS, HTTP time.Duration
	// Path is TCP as the kernel timed it (sockopt.HandshakeRTT): the
	// grade's round trip, where the RPM keeps TCP as the draft's clients
	// time it.
	Path time.Duration
	Addr string
}

// perRoundTrip is a TLS handshake's time per round trip: TLS 1.2 needs
// two before data can flow, 1.3 one.
func perRoundTrip(d time.Duration, version uint16) time.Duration {
	if version < tls.VersionTLS13 {
		return d / 2
	}
	return d
}

// clientTLS is the TLS configuration of a test's connections.
func clientTLS(insecure bool) *tls.Config {
	return &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12}
}

// certHint explains a certificate this system cannot verify: a router
// without CA certificates cannot verify anyone, and a self-signed server
// needs the user's explicit trust.
func certHint(url string, err error) error {
	if !errors.As(err, new(x509.UnknownAuthorityError)) {
		return err
	}
	if pool, perr := x509.SystemCertPool(); perr != nil || pool.Equal(x509.NewCertPool()) {
		return fmt.Errorf("rpm: %s: this system has no CA certificates to check the server's (fix: install ca-bundle): %w", url, err)
	}
	return fmt.Errorf("rpm: %s: certificate is not from a trusted authority (self-signed server?); rerun with the insecure option (sqmkit test --rpm-insecure) if you trust this server: %w", url, err)
}

// readyOne is a random one of list()'s loads that is ready, read under
// mu; ok is false when none is.
func readyOne[T any](mu *sync.Mutex, list func() []T, ready func(T) bool) (pick T, ok bool) {
	mu.Lock()
	var up []T
	for _, l := range list() {
		if ready(l) {
			up = append(up, l)
		}
	}
	mu.Unlock()
	if len(up) == 0 {
		return pick, false
	}
	return up[rand.IntN(len(up))], true
}

// dialTimeout bounds a connection's set-up.
const dialTimeout = 10 * time.Second

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
