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
	// redirects is how many redirects the server answered its requests
	// with; read when its transfers have ended
	redirects() int
	ready() bool // connected, so a self probe can share it
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

// statusError is an answer other than 200, its status as the server gave
// it ("404 Not Found", or the code alone over HTTP/1.1).
type statusError string

func (s statusError) Error() string { return "server answered " + string(s) }

// ErrConfigFetch marks a test that ended before it began: the server's
// config could not be had (fetchFailure says why).
var ErrConfigFetch = errors.New("the responsiveness server's config could not be had")

// fetchError is fetchFailure's words, marked ErrConfigFetch.
type fetchError struct{ error }

func (e fetchError) Is(target error) bool { return target == ErrConfigFetch }
func (e fetchError) Unwrap() error        { return e.error }

// fetchFailure says what failed when a responsiveness server's config
// could not be had, and the fix: the answer (a status, a redirect refused,
// a config sqmkit cannot use), the certificate (its names, its dates, its
// issuer: certHint), else the connection itself (TestFetchFailure).
func fetchFailure(cfgURL string, err error) error { return fetchError{explain(cfgURL, err)} }

func explain(cfgURL string, err error) error {
	var status statusError
	var names x509.HostnameError
	var invalid x509.CertificateInvalidError
	var bad configError
	switch {
	case errors.As(err, &bad):
		return fmt.Errorf("the responsiveness server %s answered, but not with a config sqmkit can use: %w (fix: check the URL's path; a responsiveness server publishes its config at /.well-known/nq)", cfgURL, err)
	case errors.As(err, &status):
		return fmt.Errorf("the responsiveness server %s answered, but not with its config: %w (fix: check the URL's path)", cfgURL, err)
	case errors.Is(err, errRedirect):
		return fmt.Errorf("the responsiveness server %s sent the test elsewhere: %w (sqmkit follows redirects only to https on the same host; fix: name the server it redirects to, if you trust it)", cfgURL, err)
	case errors.As(err, &names):
		return fmt.Errorf("the responsiveness server %s answered with a certificate for other names (%w): the name leads to another server (fix: check the name, and the router's DNS)", cfgURL, err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("the responsiveness server %s answered with a certificate outside its dates (%w) (fix: check this machine's clock, e.g. that NTP has set it; a router that has not learnt the time sees every certificate as not yet valid)", cfgURL, err)
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return err // certHint's words
	}
	return fmt.Errorf("the responsiveness server %s could not be reached: %w (fix: check the connection, or name another server)", cfgURL, err)
}
