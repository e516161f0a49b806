// Package http1 is a minimal HTTP/1.1 client over TLS: one connection,
// GETs and fixed-length POSTs in turn on it, with the TCP and TLS
// handshakes timed. It is the router build's way to a responsiveness
// server: net/http with its HTTP/2 would double the router binary
// (docs/design.md, "The router's way to public servers").
package http1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// Timing is a connection's set-up: when its TCP handshake began, that
// handshake (as the process and as the kernel timed it), the TLS
// handshake, the TLS version and the server's address.
type Timing struct {
	Start    time.Time
	TCP, TLS time.Duration
	Path     time.Duration // TCP as the kernel timed it (sockopt.HandshakeRTT)
	Version  uint16
	Addr     string
}

// Conn is one HTTP/1.1 connection over TLS. Its requests run one at a time.
type Conn struct {
	Timing
	raw    net.Conn
	tc     *tls.Conn
	br     *bufio.Reader
	host   string
	closed bool // the server said Connection: close, or a body was cut
	// location is the last answer's Location header, for the caller's
	// redirect policy: this package follows none itself.
	location string
	mu       sync.Mutex
}

// dialTimeout bounds a connection's set-up, as the HTTP/2 client's.
const dialTimeout = 10 * time.Second

// Dial opens a connection to u's host (port 443 unless given) and does
// the TLS handshake with cfg (ServerName is set from u). The TCP socket
// keeps little unsent (sockopt.TuneBulk): our own upload must not queue in
// our own buffer, or the delay measured is ours. With segments, TLS's
// writes leave one TCP segment per packet (sockopt.Segmented), as a
// router's clients' packets arrive.
func Dial(ctx context.Context, u *url.URL, cfg *tls.Config, segments bool) (*Conn, error) {
	if u.Scheme != "https" {
		return nil, fmt.Errorf("%s: only https is spoken", u.Redacted())
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c := &Conn{host: u.Host}
	c.Start = time.Now()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.TCP, c.Addr, c.raw = time.Since(c.Start), raw.RemoteAddr().String(), raw
	c.Path = sockopt.HandshakeRTT(raw, c.TCP)
	sockopt.TuneBulk(raw)
	cfg = cfg.Clone()
	cfg.ServerName = u.Hostname()
	cfg.NextProtos = []string{"http/1.1"}
	under := raw
	if segments {
		under = sockopt.Segmented(raw)
	}
	c.tc = tls.Client(under, cfg)
	tlsStart := time.Now()
	if err := c.tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	c.TLS, c.Version = time.Since(tlsStart), c.tc.ConnectionState().Version
	c.br = bufio.NewReaderSize(c.tc, 32<<10)
	return c, nil
}

// Raw is the TCP connection under TLS.
func (c *Conn) Raw() net.Conn { return c.raw }

// Reusable reports whether another request may follow on c.
func (c *Conn) Reusable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed
}

// Location is the last answer's Location header ("" none): a redirect's
// target, which the caller checks before it follows it.
func (c *Conn) Location() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.location
}

// Close closes the connection.
func (c *Conn) Close() error { return c.tc.Close() }

// Get fetches path and writes its body to dst; it returns the status
// code. A status other than 200 is not an error here; dst's error ends
// the request (and the connection).
func (c *Conn) Get(ctx context.Context, path string, dst io.Writer) (int, error) {
	return c.do(ctx, "GET", path, 0, nil, dst)
}

// Post sends size zero bytes to path, telling sent each piece handed to
// TLS, and reads the answer; it returns the status code.
func (c *Conn) Post(ctx context.Context, path string, size int64, sent func(int)) (int, error) {
	return c.do(ctx, "POST", path, size, sent, io.Discard)
}

func (c *Conn) do(ctx context.Context, method, path string, size int64, sent func(int), dst io.Writer) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("connection closed by the server")
	}
	// A cancelled ctx ends the request where it stands: the connection
	// cannot carry another after a cut body.
	stop := context.AfterFunc(ctx, func() { c.raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	code, err := c.exchange(method, path, size, sent, dst)
	if err != nil {
		c.closed = true
		if ctx.Err() != nil {
			return code, ctx.Err()
		}
	}
	return code, err
}

func (c *Conn) exchange(method, path string, size int64, sent func(int), dst io.Writer) (int, error) {
	head := method + " " + path + " HTTP/1.1\r\nHost: " + c.host + "\r\nUser-Agent: sqmkit\r\nAccept-Encoding: identity\r\n"
	if method == "POST" {
		head += "Content-Type: application/octet-stream\r\nContent-Length: " + strconv.FormatInt(size, 10) + "\r\n"
	}
	if _, err := io.WriteString(c.tc, head+"\r\n"); err != nil {
		return 0, err
	}
	if size > 0 {
		buf := make([]byte, 32<<10)
		for left := size; left > 0; {
			n := int(min(left, int64(len(buf))))
			if _, err := c.tc.Write(buf[:n]); err != nil {
				return 0, err
			}
			sent(n)
			left -= int64(n)
		}
	}
	code, length, chunked, err := c.readHead()
	if err != nil {
		return 0, err
	}
	if err := c.readBody(length, chunked, dst); err != nil {
		return code, err
	}
	return code, nil
}

// readHead reads the status line and headers: the code, the body's length
// (-1 when it runs to the connection's end) and whether it is chunked.
func (c *Conn) readHead() (code int, length int64, chunked bool, err error) {
	line, err := c.line()
	if err != nil {
		return 0, 0, false, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	if !strings.HasPrefix(proto, "HTTP/1.") {
		return 0, 0, false, fmt.Errorf("not an HTTP/1 answer: %.40q", line)
	}
	status, _, _ := strings.Cut(rest, " ")
	if code, err = strconv.Atoi(status); err != nil || code < 100 || code > 999 {
		return 0, 0, false, fmt.Errorf("bad status line %.40q", line)
	}
	length, c.location = -1, ""
	for {
		h, err := c.line()
		if err != nil {
			return 0, 0, false, err
		}
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			if length, err = strconv.ParseInt(value, 10, 64); err != nil || length < 0 {
				return 0, 0, false, fmt.Errorf("bad Content-Length %.20q", value)
			}
		case "transfer-encoding":
			chunked = strings.EqualFold(value, "chunked")
		case "connection":
			if strings.EqualFold(value, "close") {
				c.closed = true
			}
		case "location":
			c.location = value
		}
	}
	if code == 204 || code == 304 || code/100 == 1 {
		length = 0
	}
	if length < 0 && !chunked {
		c.closed = true
	}
	return code, length, chunked, nil
}

// maxLine bounds a header line: a hostile server cannot make us buffer.
const maxLine = 8 << 10

func (c *Conn) line() (string, error) {
	var b []byte
	for {
		part, more, err := c.br.ReadLine()
		if err != nil {
			return "", err
		}
		if b = append(b, part...); len(b) > maxLine {
			return "", errors.New("header line too long")
		}
		if !more {
			return string(b), nil
		}
	}
}

// readBody reads a body of length bytes (-1: to the end), or a chunked
// one, into dst.
func (c *Conn) readBody(length int64, chunked bool, dst io.Writer) error {
	if !chunked {
		return c.copy(length, dst)
	}
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		hex, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(hex), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size %.20q", line)
		}
		if n == 0 {
			for { // trailers, then the blank line
				if t, err := c.line(); err != nil || t == "" {
					return err
				}
			}
		}
		if err := c.copy(n, dst); err != nil {
			return err
		}
		if crlf, err := c.line(); err != nil || crlf != "" {
			return cmpErr(err, errors.New("chunk not followed by CRLF"))
		}
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// copy reads n bytes (-1: to the connection's end) into dst.
func (c *Conn) copy(n int64, dst io.Writer) error {
	buf := make([]byte, 32<<10)
	for n != 0 {
		want := len(buf)
		if n > 0 && n < int64(want) {
			want = int(n)
		}
		k, err := c.br.Read(buf[:want])
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return werr
			}
			if n > 0 {
				n -= int64(k)
			}
		}
		if err == io.EOF && n < 0 {
			return nil
		}
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
