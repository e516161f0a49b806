// Package bbproto is the wire format of sqmkit's bufferbloat test.
//
// A test uses three kinds of traffic to one server port, TCP and UDP alike
// (default 8693):
//
//   - One TCP control connection carrying messages of type (1 byte), length
//     (2 bytes) and JSON. The client sends Hello (version, optional token,
//     total duration, streams per direction, probe interval); the server
//     answers Accept (random session id and its limits) or Refuse (a reason
//     a person can act on) and closes. The connection then stays quiet until
//     the client's Done; the server answers with a Report (a bitmap of the
//     probe sequence numbers it received, payload bytes each way, and why
//     it ended the test early, if it did). The server may send the Report
//     unasked when the duration or byte budget runs out.
//   - TCP data streams, each opening with a 16-byte StreamHeader ("SQMD",
//     version, kind, session id) from the client, then carrying frames of
//     type (1 byte) and length (3 bytes). On a download stream the server
//     sends Data frames and the client may send Ping frames, which the
//     server answers with a Pong queued behind the data it is sending; on an
//     upload stream the roles of Data and Ping are swapped, and the server
//     also sends Count frames (bytes received so far) so upload goodput is
//     measured at the receiver.
//   - UDP probes, fixed layout (see Probe), answered in place, so a reply
//     is exactly as large as its request and never larger: no amplification.
//
// Every parser here rejects what it does not understand with an error and
// never allocates more than a fixed bound.
package bbproto

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Version is the protocol version; client and server must agree exactly.
// Version 2 carries control messages over 64 KB (long tests' reports).
const Version = 2

// DefaultPort is used for both TCP and UDP when the user names no port.
const DefaultPort = 8693

// SessionID names one test. It is random, and the server also checks the
// source address of streams and probes, so guessing one buys nothing.
type SessionID [8]byte

func (s SessionID) String() string { return hex.EncodeToString(s[:]) }

// MarshalText lets SessionID travel as a hex string in control messages.
func (s SessionID) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the hex form.
func (s *SessionID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(s) {
		return fmt.Errorf("session id: want %d hex digits, got %d", 2*len(s), len(b))
	}
	_, err := hex.Decode(s[:], b)
	return err
}

var errShort = errors.New("truncated")

// ReadFull is io.ReadFull that reports a short read as errShort wrapped with
// what was being read, so logs say which field a client cut off.
func readFull(r io.Reader, b []byte, what string) error {
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: %w", what, errShort)
		}
		return err
	}
	return nil
}

var be = binary.BigEndian

// hostname is a DNS name: labels of letters, digits and inner hyphens.
var hostname = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// SplitHostPort accepts host, host:port, [v6], [v6]:port and a bare IPv6
// literal, and fills in DefaultPort: how the client names a server and the
// server names where it listens.
func SplitHostPort(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return strings.Trim(s, "[]"), strconv.Itoa(DefaultPort)
}

// CheckServer says what is wrong with a server address as a user wrote
// it: a host (an IP address or a DNS name, so never a flag, a path or
// markup when it is passed on), and a port from 1 to 65535 when one is
// given. A port out of range would otherwise be dialled, and retried, for
// ever (TestCheckServer).
func CheckServer(s string) error {
	host, port := SplitHostPort(s)
	if host == "" {
		return fmt.Errorf("%q names no host (write HOST or HOST:PORT, e.g. 192.0.2.1:%d)", s, DefaultPort)
	}
	if net.ParseIP(host) == nil && !hostname.MatchString(host) {
		return fmt.Errorf("%q: %q is neither an IP address nor a host name (letters, digits, dots and inner hyphens; write HOST or HOST:PORT, e.g. 192.0.2.1:%d)", s, host, DefaultPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a port from 1 to 65535 (write HOST or HOST:PORT, e.g. %s:%d)", s, port, host, DefaultPort)
	}
	return nil
}

// DefaultPublicServer is what a test or tune without a server measures
// against: the responsiveness configuration Apple publishes for
// networkQuality, a CDN near most users that speaks the draft's protocol.
const DefaultPublicServer = "https://mensura.cdn-apple.com/api/v1/gm/config"

// DefaultServer is the server of a test or tune nobody named one for:
// $SQMKIT_SERVER, else configured (the queue's option test_server), else
// DefaultPublicServer (testrun's TestResolve).
func DefaultServer(configured string) string {
	return cmp.Or(os.Getenv("SQMKIT_SERVER"), configured, DefaultPublicServer)
}

// IsURL: s names a responsiveness server by its config URL, not a sqmkit
// serve by HOST[:PORT].
func IsURL(s string) bool { return strings.Contains(s, "://") }

// CheckTarget says what is wrong with a server as a user wrote it, either
// kind: a config URL (CheckServerURL) or HOST[:PORT] (CheckServer).
func CheckTarget(s string) error {
	if IsURL(s) {
		return CheckServerURL(s)
	}
	return CheckServer(s)
}

// CheckServerURL says what is wrong with a responsiveness server's config
// URL as a user wrote it: http or https, a host that CheckServer accepts, a
// path of URL-safe characters, nothing a shell or a browser would read
// otherwise (TestCheckServerURL). Parsed by hand: stricter than net/url,
// which takes user info, fragments and any byte in a path.
func CheckServerURL(s string) error {
	hostport, path, ok := SplitURL(s)
	if !ok || strings.ContainsAny(hostport, "@") || !urlPath.MatchString(path) {
		return fmt.Errorf("%q is not a responsiveness server's config URL (write https://HOST/PATH, e.g. https://mensura.cdn-apple.com/api/v1/gm/config)", s)
	}
	if err := CheckServer(hostport); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	return nil
}

// urlPath: the characters of a config URL's path and query.
var urlPath = regexp.MustCompile(`^(/[A-Za-z0-9._~!$&()*+,;=:@%/?-]*)?$`)

// SplitURL splits an http or https URL into its host[:port] and the rest
// (path and query); ok is false for any other scheme or no host.
func SplitURL(s string) (hostport, path string, ok bool) {
	rest, found := strings.CutPrefix(s, "https://")
	if !found {
		if rest, found = strings.CutPrefix(s, "http://"); !found {
			return "", "", false
		}
	}
	hostport, path = rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, path = rest[:i], rest[i:]
	}
	return hostport, path, hostport != ""
}
