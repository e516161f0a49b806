package rpm

import (
	"errors"
	"fmt"
	"net/url"
)

// Where a responsiveness server may send the client: the one rule both
// builds follow (HTTP/2's CheckRedirect and the HTTP/1.1 wire's own
// redirects), so a hostile server cannot turn a test into requests to
// another host, a plain-http one, or one that carries credentials
// (TestRedirectPolicy, TestHostileServers).

// maxRedirects bounds a chain of redirects, as browsers and net/http do.
const maxRedirects = 5

// policy anchors every redirect on the config URL's host, as the user (or
// the compiled-in default) named it.
type policy struct{ host string }

func newPolicy(cfgURL string) (policy, error) {
	u, err := url.Parse(cfgURL)
	if err != nil || u.Host == "" {
		return policy{}, fmt.Errorf("rpm: %q is not a URL", cfgURL)
	}
	return policy{host: u.Host}, nil
}

// errRedirect marks a redirect the policy refused.
var errRedirect = errors.New("redirect refused")

// allow says whether the client may follow a redirect to u, the hops-th
// of its chain: https, the config's host and port, no user info, at most
// maxRedirects.
func (p policy) allow(u *url.URL, hops int) error {
	switch {
	case hops >= maxRedirects:
		return fmt.Errorf("%w: more than %d redirects", errRedirect, maxRedirects)
	case u.Scheme != "https":
		return fmt.Errorf("%w: to %s, which is not https", errRedirect, u.Redacted())
	case u.User != nil:
		return fmt.Errorf("%w: to %s, which carries credentials", errRedirect, u.Redacted())
	case u.Host != p.host:
		return fmt.Errorf("%w: to %s, another host than the config's %s", errRedirect, u.Redacted(), p.host)
	}
	return nil
}

// follow resolves a redirect's Location against the URL that answered it
// and checks it (allow).
func (p policy) follow(from *url.URL, location string, hops int) (*url.URL, error) {
	if location == "" {
		return nil, fmt.Errorf("%w: a redirect from %s without a Location", errRedirect, from.Redacted())
	}
	to, err := from.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("%w: Location %.80q is not a URL", errRedirect, location)
	}
	return to, p.allow(to, hops)
}

// isRedirect: a status the client follows (GETs only; an upload's body is
// never sent again).
func isRedirect(code int) bool {
	switch code {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// hostNote names the endpoints' host when it is not the config's: the
// draft lets a config send the load elsewhere, and the user should know
// where their test went.
func (p policy) hostNote(eps endpoints) string {
	if eps.Large.Host == p.host {
		return ""
	}
	return fmt.Sprintf("the server's config at %s sends the load and the probes to another host, %s", p.host, eps.Large.Host)
}

// errEmptyBody: a large download that ended before its first byte. Fetched
// again at once, it would be a flood of requests that loads nothing.
var errEmptyBody = errors.New("answered with an empty body")
