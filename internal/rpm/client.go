//go:build !router

package rpm

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// Options tune Measure. Zero values take the defaults in brackets.
type Options struct {
	// Insecure accepts any server certificate. Needed for servers with a
	// self-signed certificate, like `sqmkit serve --rpm` without --cert
	// (networkQuality's -k). Off by default: a test that silently talks
	// to an impostor measures the impostor's path.
	Insecure bool
	MaxConns int           // load-generating connections per direction [MaxConns]
	MaxRate  int           // probe pairs per second at most [MaxRate]
	MaxStage time.Duration // time limit of each direction [20s]
	Interval time.Duration // the draft's ID: how often stability is judged [1s]
	Log      func(string)  // one line per decision; nil = silent
}

// Result of one measurement: download first, then upload.
type Result struct {
	URL          string  // the configuration URL used
	RPM          float64 // from the final windows of both directions pooled
	DownloadMbps float64
	UploadMbps   float64
	Download     Stage
	Upload       Stage
	Notes        []string
}

// Stage is one direction under load.
type Stage struct {
	RPM        float64
	Mbps       float64 // goodput, moving average over the last MAD intervals
	Conns      int     // load-generating connections at the end
	Probes     int     // foreign plus self probes in the final window
	Confidence string  // "high", "medium" or "low", as the draft defines them; "cut short" when the test ended first
	Seconds    float64
	Lost       int // probes that failed (refused, reset, an error status): lost samples
	// Trimmed means of the final window, milliseconds: TCP handshake, TLS
	// handshake per round trip, and the 1-byte GET on a new connection
	// (foreign) and on a loaded one (self).
	TCPms, TLSms, HTTPForeignMs, HTTPSelfMs float64
}

// BBResult is the summary stored in a bufferbloat test result.
func (r Result) BBResult() *bbresult.RPM {
	return &bbresult.RPM{URL: r.URL, RPM: r.RPM, DownloadMbps: r.DownloadMbps, UploadMbps: r.UploadMbps}
}

// Measure runs the responsiveness test against server, a configuration URL
// or a bare host[:port] (then https://host/.well-known/nq is used).
func Measure(ctx context.Context, server string, opts Options) (Result, error) {
	cfgURL, err := configURL(server)
	if err != nil {
		return Result{}, err
	}
	if opts.MaxConns < 0 || opts.MaxRate < 0 || opts.MaxStage < 0 || opts.Interval < 0 {
		return Result{}, errors.New("rpm: MaxConns, MaxRate, MaxStage and Interval must not be negative")
	}
	m := &measurer{
		opts: Options{
			Insecure: opts.Insecure,
			MaxConns: cmp.Or(opts.MaxConns, MaxConns),
			MaxRate:  cmp.Or(opts.MaxRate, MaxRate),
			MaxStage: cmp.Or(opts.MaxStage, 20*time.Second),
			Interval: cmp.Or(opts.Interval, time.Second),
			Log:      opts.Log,
		},
		tls: &tls.Config{InsecureSkipVerify: opts.Insecure, MinVersion: tls.VersionTLS12},
	}
	if m.opts.Log == nil {
		m.opts.Log = func(string) {}
	}
	res := Result{URL: cfgURL}
	if _, err = m.fetchConfig(ctx, cfgURL); err != nil {
		return res, err
	}
	if opts.Insecure {
		res.Notes = append(res.Notes, "server certificate not verified (insecure mode)")
	}
	var pooled latencies
	for _, up := range []bool{false, true} {
		st, win, notes, err := m.stage(ctx, up)
		pooled.add(win)
		res.Notes = append(res.Notes, notes...)
		if up {
			res.Upload, res.UploadMbps = st, st.Mbps
		} else {
			res.Download, res.DownloadMbps = st, st.Mbps
		}
		if err != nil {
			// what was measured until then is still the result's
			res.RPM = pooled.means().rpm()
			return res, err
		}
	}
	res.RPM = pooled.means().rpm()
	m.opts.Log(fmt.Sprintf("rpm: %.0f RPM (download %.0f, upload %.0f)", res.RPM, res.Download.RPM, res.Upload.RPM))
	return res, nil
}

type measurer struct {
	opts     Options
	tls      *tls.Config
	eps      endpoints
	pol      policy // where redirects may lead, set by fetchConfig
	segments bool   // uploads one TCP segment per packet (bbclient.Config.OneSegment)
}

// transport makes a client that opens its own connection, HTTP/2 only:
// self probes are only meaningful multiplexed onto a load connection.
// onDial, if not nil, sees each new TCP connection; with segments, TLS's
// writes on it leave one TCP segment per packet (sockopt.Segmented).
func (m *measurer) transport(onDial func(net.Conn), segments bool) *http.Transport {
	// ALPN offers h2 alone; the transport adds http/1.1 to the offer, so
	// get refuses an answer that is not HTTP/2.
	cfg := m.tls.Clone()
	cfg.NextProtos = []string{"h2"}
	d := &net.Dialer{Timeout: dialTimeout}
	return &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   cfg,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				c = sockopt.Replenish(c) // our own uploads must not bloat our own socket
				if segments {
					c = sockopt.Segmented(c)
				}
				if onDial != nil {
					onDial(c)
				}
			}
			return c, err
		},
		TLSHandshakeTimeout: dialTimeout,
		DisableCompression:  true,
		MaxConnsPerHost:     1, // requests wait for the one connection instead of dialing another
	}
}

func (m *measurer) fetchConfig(ctx context.Context, cfgURL string) (endpoints, error) {
	var err error
	if m.pol, err = newPolicy(cfgURL); err != nil {
		return endpoints{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr := m.transport(nil, false)
	defer tr.CloseIdleConnections()
	body, _, err := get(ctx, m.client(tr), cfgURL, 64<<10)
	if err != nil {
		return endpoints{}, err
	}
	eps, err := parseConfig(body)
	if err == nil {
		m.eps = eps
		m.opts.Log(fmt.Sprintf("rpm: config %s: load %s, probes %s, upload %s", cfgURL, eps.Large, eps.Small, eps.Upload))
	}
	return eps, err
}

// loader is one load-generating connection.
type loader struct {
	tr     *http.Transport
	client *http.Client
	bytes  atomic.Int64 // body bytes read (download) or handed to HTTP/2 (upload)
	ready  atomic.Bool  // its connection is up, so self probes can share it
	hops   atomic.Int64 // redirects its requests were answered with
	conn   atomic.Pointer[net.Conn]
}

// moved is the loader's goodput so far. For uploads the body count runs
// ahead of the wire by the peer's flow-control window (1 MB per stream at
// sqmkit's server, more elsewhere), which would read as a burst each time
// a connection is added, so where the kernel says how many bytes the peer
// acknowledged, that count is used instead.
func (l *loader) moved(up bool) int64 {
	if c := l.conn.Load(); up && c != nil {
		if n, ok := sockopt.BytesAcked(*c); ok {
			return n
		}
	}
	return l.bytes.Load()
}

// run is one direction: a load connection added every interval up to
// MaxConns, also after goodput is stable, as the draft's algorithm does
// (TestMeasureAddsConnectionsPastSaturation), then probe until
// responsiveness is stable or MaxStage is over. It returns the
// final window's probe times for the pooled RPM.
type run struct {
	m   *measurer
	up  bool
	ctx context.Context
	wg  sync.WaitGroup

	mu       sync.Mutex
	loaders  []*loader
	windows  []latencies // probe results by the interval they completed in
	rate     float64     // probe pairs per second
	errc     chan error
	inflight [2]chan struct{} // foreign, self
	lost     atomic.Int64     // probes that failed
	lastErr  atomic.Pointer[error]
	waiting  waiting // self probes not yet returned
}

// maxInflight bounds outstanding probes of each kind: under seconds of
// bloat the probe rate would otherwise pile up connections at the server.
// Each foreign probe is a new connection in its TCP and TLS handshake
// until its request, and servers cap those per client (sqmkit serve: 16,
// ForeignWithinServerCap), so foreign probes stay well under that; self
// probes share the load connections and only count against HTTP/2's
// stream limit.
var maxInflight = [2]int{8, 48}

func (m *measurer) stage(parent context.Context, up bool) (Stage, latencies, []string, error) {
	name := map[bool]string{false: "download", true: "upload"}[up]
	ctx, cancel := context.WithCancel(parent)
	r := &run{m: m, up: up, ctx: ctx, windows: []latencies{{}}, rate: float64(min(10, m.opts.MaxRate)),
		errc: make(chan error, 1)}
	for i := range r.inflight {
		r.inflight[i] = make(chan struct{}, maxInflight[i])
	}
	defer func() {
		cancel()
		r.wg.Wait()
		for _, l := range r.loaders {
			l.tr.CloseIdleConnections()
		}
	}()

	start := time.Now()
	r.addLoader()
	r.wg.Add(1)
	go r.probeLoop()
	tick := time.NewTicker(m.opts.Interval)
	defer tick.Stop()

	var (
		perInterval []float64 // bytes per interval
		goodput     []float64 // moving averages, bytes/s
		delays      []float64 // the window's mean delay per interval (means.delay)
		saturated   bool
		last        int64
		notes       []string
	)
	for i := 0; ; i++ {
		select {
		case <-parent.Done():
			// cut short: what the last intervals measured, said as such
			st, win, waited := r.summary(i, goodputOf(perInterval, m.opts.Interval), "cut short", start, name)
			notes = append(append(notes, waited...), r.lostNote(name)...)
			return st, win, append(notes, fmt.Sprintf("%s cut short after %.1f s: %v", name, time.Since(start).Seconds(), parent.Err())), parent.Err()
		case err := <-r.errc:
			return Stage{}, latencies{}, nil, fmt.Errorf("rpm: %s: %w", name, err)
		case <-tick.C:
		}
		var total int64
		r.mu.Lock()
		for _, l := range r.loaders {
			total += l.moved(up)
		}
		r.windows = append(r.windows, latencies{})
		r.mu.Unlock()
		perInterval = append(perInterval, float64(total-last))
		last = total
		ma := goodputOf(perInterval, m.opts.Interval)
		r.setRate(probeRate(ma, m.opts.MaxRate))

		if !saturated {
			goodput = append(goodput, ma)
			if saturated = stable(goodput); saturated {
				m.opts.Log(fmt.Sprintf("rpm: %s goodput stable at %.1f Mbit/s with %d connections after %.1f s", name, ma*8/1e6, len(r.loaders), time.Since(start).Seconds()))
			}
		}
		if len(r.loaders) < m.opts.MaxConns {
			r.addLoader()
		}
		conf := ""
		if saturated {
			if v := r.window(i).means().delay(); !math.IsNaN(v) {
				delays = append(delays, v)
			}
			if stable(delays) {
				conf = "high"
			}
		}
		if conf == "" && time.Since(start) >= m.opts.MaxStage {
			// The draft's confidence levels for a run cut short by the limit.
			conf = "low"
			if saturated && len(delays) >= mad {
				conf = "medium"
			}
			if !saturated {
				notes = append(notes, fmt.Sprintf("%s goodput did not stabilise within %v; RPM is from the last %d intervals", name, m.opts.MaxStage, mad))
			} else {
				notes = append(notes, fmt.Sprintf("%s responsiveness did not stabilise within %v", name, m.opts.MaxStage))
			}
		}
		if conf != "" {
			st, win, waited := r.summary(i, ma, conf, start, name)
			notes = append(append(notes, waited...), r.lostNote(name)...)
			if math.IsNaN(st.RPM) {
				return st, win, notes, fmt.Errorf("rpm: %s: no foreign or no self probe completed in the last %d intervals%s", name, mad, r.lastError())
			}
			m.opts.Log(fmt.Sprintf("rpm: %s %.0f RPM (%s confidence), %.1f Mbit/s, %d connections", name, st.RPM, conf, st.Mbps, st.Conns))
			return st, win, notes, nil
		}
	}
}

// summary is the stage as the window ending at interval i measured it;
// with no loaded probe returned in it, those still waiting count at their
// age (waiting), a finished stage's confidence is low, and the note says so.
func (r *run) summary(i int, goodput float64, conf string, start time.Time, name string) (Stage, latencies, []string) {
	win := r.window(i)
	var note []string
	ages := r.waiting.ages()
	waited := len(win.HTTPSelf) == 0 && len(ages) > 0
	if waited {
		win.HTTPSelf = ages
		if conf != "cut short" {
			conf = "low"
		}
	}
	mn := win.means()
	if waited {
		note = append(note, fmt.Sprintf("%s: no loaded probe returned in the last %d intervals; the %d still waiting count at their age so far, so the loaded latency (%.1f s) is a floor and the RPM a ceiling", name, mad, len(ages), mn.HTTPSelf/1000))
	}
	r.mu.Lock()
	conns := len(r.loaders)
	r.mu.Unlock()
	return Stage{
		RPM: mn.rpm(), Mbps: goodput * 8 / 1e6, Conns: conns,
		Probes:     len(win.TCP) + len(win.HTTPSelf),
		Confidence: conf, Seconds: time.Since(start).Seconds(), Lost: int(r.lost.Load()),
		TCPms: mn.TCP, TLSms: mn.TLS, HTTPForeignMs: mn.HTTPForeign, HTTPSelfMs: mn.HTTPSelf,
	}, win, note
}

// goodputOf is the draft's moving average goodput in bytes per second; 0
// before the first interval.
func goodputOf(perInterval []float64, interval time.Duration) float64 {
	if len(perInterval) == 0 {
		return 0
	}
	return movingAverage(perInterval) / interval.Seconds()
}

// lostNote says how many probes failed, with the last reason.
func (r *run) lostNote(name string) []string {
	if n := r.lost.Load(); n > 0 {
		return []string{fmt.Sprintf("%s: %d probes failed and were counted as lost%s", name, n, r.lastError())}
	}
	return nil
}

func (r *run) lastError() string {
	if e := r.lastErr.Load(); e != nil {
		return " (last: " + (*e).Error() + ")"
	}
	return ""
}

// probeFailed counts a failed probe as a lost sample: one refused or reset
// connection (a server at its limits, a drop under load) says something
// about the path or the server, not that the test is over.
func (r *run) probeFailed(err error) {
	if r.ctx.Err() != nil {
		return // the stage is over; errors from cancelled requests are expected
	}
	r.lost.Add(1)
	r.lastErr.Store(&err)
}

// movingAverage is the draft's moving average aggregate goodput: the bytes
// of the last MAD intervals (fewer at the start) per interval.
func movingAverage(perInterval []float64) float64 {
	w := perInterval[max(0, len(perInterval)-mad):]
	var sum float64
	for _, b := range w {
		sum += b
	}
	return sum / float64(len(w))
}

// window merges the probe results of intervals i-MAD+1 … i.
func (r *run) window(i int) latencies {
	r.mu.Lock()
	defer r.mu.Unlock()
	var w latencies
	for _, l := range r.windows[max(0, i-mad+1) : i+1] {
		w.add(l)
	}
	return w
}

func (r *run) record(f func(*latencies)) {
	r.mu.Lock()
	f(&r.windows[len(r.windows)-1])
	r.mu.Unlock()
}

func (r *run) setRate(v float64) {
	r.mu.Lock()
	r.rate = v
	r.mu.Unlock()
}

func (r *run) fail(err error) {
	if r.ctx.Err() != nil {
		return // the stage is over; errors from cancelled requests are expected
	}
	select {
	case r.errc <- err:
	default:
	}
}

func (r *run) addLoader() {
	l := r.m.newLoader(r.up)
	r.mu.Lock()
	r.loaders = append(r.loaders, l)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for r.ctx.Err() == nil {
			if err := r.m.load(r.ctx, l, r.up); err != nil {
				r.fail(err)
				return
			}
		}
	}()
}

// newLoader is a load-generating connection, not yet connected; an
// upload's goes one segment per packet when the test asks (m.segments).
func (m *measurer) newLoader(up bool) *loader {
	l := &loader{}
	l.tr = m.transport(func(c net.Conn) { l.conn.Store(&c) }, up && m.segments)
	l.client = m.client(l.tr)
	check := l.client.CheckRedirect
	l.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		l.hops.Add(1)
		return check(req, via)
	}
	return l
}

// load runs one large GET or one endless POST (up) on l until it ends.
func (m *measurer) load(ctx context.Context, l *loader, up bool) error {
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { l.ready.Store(true) }}
	ctx = httptrace.WithClientTrace(ctx, trace)
	var req *http.Request
	var err error
	if up {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, m.eps.Upload.String(), &zeroReader{n: &l.bytes, limit: l.unsent})
		if err == nil {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, m.eps.Large.String(), nil)
		if err == nil {
			req.Header.Set("Accept-Encoding", "identity")
		}
	}
	if err != nil {
		return err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %w", req.URL, statusError(resp.Status))
	}
	buf := make([]byte, 64<<10)
	var got int64
	for {
		n, err := resp.Body.Read(buf)
		if got += int64(n); !up {
			l.bytes.Add(int64(n))
		}
		if err == io.EOF && got == 0 && !up {
			return fmt.Errorf("%s: %w", req.URL, errEmptyBody)
		}
		if err == io.EOF {
			return nil // the object ended; the caller fetches it again
		}
		if err != nil {
			return err
		}
	}
}

// zeroReader is an endless upload body that counts what the transport took.
// Each read is at most what limit allows, the socket's unsent mark (5 ms of
// the connection's rate, loader.unsent): the transport writes one DATA frame
// per read, and a request on the same connection waits for the frame being
// written, so frames of the transport's own size (up to 512 kB where the
// server allows large frames) kept self probes waiting hundreds of ms behind
// our own upload (TestZeroReaderKeepsToLimit). The limit is whole segments
// (sockopt.Unsent), and a read leaves room in it for the frame's and the
// TLS record's headers, so a record fills its segments without a runt
// packet behind it.
type zeroReader struct {
	n     *atomic.Int64
	limit func() (int, bool)
}

// recordHeaders is what a DATA frame's payload gains on the wire: the
// frame's 9-byte header and a TLS record's at most 29 (TLS 1.2's AEAD;
// 1.3's is 22).
const recordHeaders = 9 + 29

func (z *zeroReader) Read(p []byte) (int, error) {
	if n, ok := z.limit(); ok {
		p = p[:min(len(p), max(1, n-recordHeaders))]
	}
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

// unsent is what l's connection may hold unsent (sockopt.Unsent); false
// before it is connected.
func (l *loader) unsent() (int, bool) {
	if c := l.conn.Load(); c != nil {
		return sockopt.Unsent(*c)
	}
	return 0, false
}

func (m *measurer) multiplexed() bool { return true }

func (m *measurer) newLoad(up bool) load { return &h2Load{m: m, loader: m.newLoader(up), up: up} }

// h2Load is a load connection of RunPhases over HTTP/2.
type h2Load struct {
	m *measurer
	*loader
	up bool
}

func (l *h2Load) transfer(ctx context.Context) error { return l.m.load(ctx, l.loader, l.up) }
func (l *h2Load) moved() int64                       { return l.loader.moved(l.up) }
func (l *h2Load) ready() bool                        { return l.loader.ready.Load() }
func (l *h2Load) redirects() int                     { return int(l.loader.hops.Load()) }
func (l *h2Load) close()                             { l.tr.CloseIdleConnections() }
func (l *h2Load) self(ctx context.Context) (time.Duration, bool, error) {
	return l.m.self(ctx, l.loader)
}
