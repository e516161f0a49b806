package rpm

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRedirectPolicy: a redirect is followed only to https on the config's
// own host and port, without credentials, a few hops at most.
func TestRedirectPolicy(t *testing.T) {
	p, err := newPolicy("https://mensura.cdn-apple.com/api/v1/gm/config")
	if err != nil {
		t.Fatal(err)
	}
	from, _ := url.Parse("https://mensura.cdn-apple.com/api/v1/gm/large")
	for _, c := range []struct {
		location string
		hops     int
		want     string // "" followed
	}{
		{"/api/v1/gm/large2", 0, ""},
		{"https://mensura.cdn-apple.com/other", 4, ""},
		{"https://mensura.cdn-apple.com/other", 5, "more than 5 redirects"},
		{"http://mensura.cdn-apple.com/large", 0, "not https"},
		{"http://10.0.0.1/admin", 0, "not https"},
		{"https://10.0.0.1/admin", 0, "another host"},
		{"https://mensura.cdn-apple.com:8443/large", 0, "another host"},
		{"https://user:pw@mensura.cdn-apple.com/large", 0, "credentials"},
		{"//evil.example/large", 0, "another host"},
		{"", 0, "without a Location"},
		{"https://%zz", 0, "not a URL"},
	} {
		_, err := p.follow(from, c.location, c.hops)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want it followed", c.location, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errRedirect)):
			t.Errorf("%q: %v, want a refusal with %q", c.location, err, c.want)
		}
	}
	if strings.Contains(fmt.Sprint(p.allow(&url.URL{Scheme: "https", Host: "x", User: url.UserPassword("u", "secret")}, 0)), "secret") {
		t.Error("a refusal prints the password")
	}
}

// TestFetchFailure: a config that could not be had says what failed, not
// always that the server could not be reached.
func TestFetchFailure(t *testing.T) {
	const u = "https://server.example/config"
	for _, c := range []struct {
		err  error
		want string
	}{
		{configError{errors.New("rpm config: \"version\" is 2")}, "not with a config sqmkit can use"},
		{fmt.Errorf("rpm: %s: %w", u, statusError("404 Not Found")), "answered 404 Not Found"},
		{fmt.Errorf("rpm: %w", fmt.Errorf("%w: to http://x", errRedirect)), "sent the test elsewhere"},
		{fmt.Errorf("tls: %w", x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{"other.example"}}, Host: "server.example"}), "certificate for other names"},
		{x509.CertificateInvalidError{Cert: &x509.Certificate{NotBefore: time.Now().Add(time.Hour)}, Reason: x509.Expired}, "check this machine's clock"},
		{errors.New("dial tcp: connection refused"), "could not be reached"},
	} {
		if got := fetchFailure(u, c.err); !strings.Contains(got.Error(), c.want) || !strings.Contains(got.Error(), u) {
			t.Errorf("%v: %q, want %q and the URL", c.err, got, c.want)
		}
	}
}

// TestWhyCountsRedirects: a load whose redirect chain had not ended with
// the phase failed nothing yet; the note says what it was answered with,
// not that the server held its connections without data.
func TestWhyCountsRedirects(t *testing.T) {
	u, _ := url.Parse("https://example.net/large")
	p := &phaseRun{}
	if got := p.why("large-download", u, 0); !strings.Contains(got, "kept its connections open without moving data") {
		t.Errorf("nothing seen: %q", got)
	}
	p.redirected[0] = 7
	if got := p.why("large-download", u, 0); !strings.Contains(got, "answered the load's requests with 7 redirects and moved no data") {
		t.Errorf("redirects seen: %q", got)
	}
	p.dirFail[0] = errors.New("redirect refused: more than 5 redirects")
	if got := p.why("large-download", u, 0); !strings.Contains(got, "failed: redirect refused: more than 5 redirects") {
		t.Errorf("a failure: %q", got)
	}
}
