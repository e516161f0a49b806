package rpm

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqmkit/sqmkit/internal/http1"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// h1 speaks HTTP/1.1: each load is one connection whose objects follow
// one another; no GET can share it, so there are no self probes.
type h1 struct {
	tls      *tls.Config
	eps      endpoints
	pol      policy // where redirects may lead, set by fetchConfig
	log      func(string)
	segments bool // uploads one TCP segment per packet (bbclient.Config.OneSegment)
}

// uploadSize is one POST's body. Servers cap a request body (the
// reference nginx setup at 250 MB), so the endless upload of HTTP/2 is a
// series of POSTs here, each a couple of seconds at a gigabit.
var uploadSize int64 = 64 << 20

func (w *h1) multiplexed() bool { return false }

// get dials u and GETs it, at most max body bytes, following the
// redirects w's policy allows and insisting on 200: the config's fetch and
// each foreign probe. It returns the last connection's set-up times and
// its GET's.
func (w *h1) get(ctx context.Context, u *url.URL, max int) (http1.Timing, []byte, time.Duration, error) {
	for hops := 0; ; hops++ {
		c, err := http1.Dial(ctx, u, w.tls, false)
		if err != nil {
			return http1.Timing{}, nil, 0, certHint(u.Redacted(), err)
		}
		body := &limited{max: max}
		start := time.Now()
		code, err := c.Get(ctx, u.RequestURI(), body)
		d := time.Since(start)
		c.Close()
		if err == nil && isRedirect(code) {
			next, perr := w.pol.follow(u, c.Location(), hops)
			if perr == nil {
				u = next
				continue
			}
			err = perr
		}
		if err == nil && code != 200 {
			err = statusError(strconv.Itoa(code))
		}
		if err != nil {
			return c.Timing, nil, d, fmt.Errorf("rpm: %s: %w", u.Redacted(), err)
		}
		return c.Timing, body.b, d, nil
	}
}

func (w *h1) fetchConfig(ctx context.Context, cfgURL string) (endpoints, error) {
	u, err := url.Parse(cfgURL)
	if err != nil {
		return endpoints{}, err
	}
	if w.pol, err = newPolicy(cfgURL); err != nil {
		return endpoints{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*dialTimeout)
	defer cancel()
	_, body, _, err := w.get(ctx, u, 64<<10)
	if err != nil {
		return endpoints{}, err
	}
	eps, err := parseConfig(body)
	if err == nil {
		w.eps = eps
		w.log(fmt.Sprintf("rpm: config %s over HTTP/1.1: load %s, probes %s, upload %s", cfgURL, eps.Large, eps.Small, eps.Upload))
	}
	return eps, err
}

func (w *h1) foreign(ctx context.Context) (foreignTimes, error) {
	t, _, d, err := w.get(ctx, w.eps.Small, 1<<10)
	return foreignTimes{Start: t.Start, TCP: t.TCP, TLS: perRoundTrip(t.TLS, t.Version), HTTP: d, Path: t.Path, Addr: t.Addr}, err
}

func (w *h1) newLoad(up bool) load { return &h1Load{w: w, up: up} }

// h1Load is one load connection, dialled at its first transfer and again
// whenever the server closes it.
type h1Load struct {
	w      *h1
	up     bool
	bytes  atomic.Int64 // body bytes read, or handed to TLS
	mu     sync.Mutex
	c      *http1.Conn
	acked  int64 // bytes acked on connections already closed
	kernel bool  // the kernel counted acked bytes on a closed one
	// target is where a download's redirects led (nil: the config's large
	// URL), hops how many it followed: a load follows maxRedirects in all.
	target *url.URL
	hops   int
}

func (l *h1Load) redirects() int { return l.hops }

func (l *h1Load) transfer(ctx context.Context) error {
	u := l.w.eps.Large
	if l.up {
		u = l.w.eps.Upload
	} else if l.target != nil {
		u = l.target
	}
	l.mu.Lock()
	c := l.c
	l.mu.Unlock()
	if c == nil || !c.Reusable() {
		l.retire()
		var err error
		if c, err = http1.Dial(ctx, u, l.w.tls, l.up && l.w.segments); err != nil {
			return certHint(u.Redacted(), err)
		}
		l.mu.Lock()
		l.c = c
		l.mu.Unlock()
	}
	if l.up {
		code, err := c.Post(ctx, u.RequestURI(), uploadSize, func(n int) { l.bytes.Add(int64(n)) })
		if err == nil && code != 200 {
			err = fmt.Errorf("%s: %w", u.Redacted(), statusError(strconv.Itoa(code)))
		}
		return err
	}
	before := l.bytes.Load()
	code, err := c.Get(ctx, u.RequestURI(), counter{&l.bytes})
	switch {
	case err != nil:
		return err
	case isRedirect(code):
		next, err := l.w.pol.follow(u, c.Location(), l.hops)
		l.target, l.hops = next, l.hops+1
		return err
	case code != 200:
		return fmt.Errorf("%s: %w", u.Redacted(), statusError(strconv.Itoa(code)))
	case l.bytes.Load() == before:
		return fmt.Errorf("%s: %w", u.Redacted(), errEmptyBody)
	}
	return nil
}

// retire closes l's connection, if any, and counts what its peer
// acknowledged. Until the next one is dialled (a handshake through a
// bloated queue can take seconds), moved then reads the connections
// already closed, not the closed one's count again or the bytes handed
// to TLS, which would show a burst and then a drop
// (TestH1UploadMovedAcrossReconnect).
func (l *h1Load) retire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return
	}
	if n, ok := sockopt.BytesAcked(l.c.Raw()); ok {
		l.acked += n
		l.kernel = true
	}
	l.c.Close()
	l.c = nil
}

// moved: for uploads the bytes the peer acknowledged, where the kernel
// says (what was handed to TLS runs ahead by the socket's buffer).
func (l *h1Load) moved() int64 {
	if !l.up {
		return l.bytes.Load()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil && l.kernel {
		return l.acked
	}
	if l.c != nil {
		if n, ok := sockopt.BytesAcked(l.c.Raw()); ok {
			return l.acked + n
		}
	}
	return l.bytes.Load()
}

func (l *h1Load) ready() bool { return false }

func (l *h1Load) self(context.Context) (time.Duration, bool, error) { return 0, false, nil }

func (l *h1Load) close() { l.retire() }

// counter counts a body's bytes and drops them.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// limited keeps a body of at most max bytes: a larger one is refused.
type limited struct {
	b   []byte
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.max {
		return 0, fmt.Errorf("body over %d bytes", l.max)
	}
	l.b = append(l.b, p...)
	return len(p), nil
}
