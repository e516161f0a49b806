//go:build !router

package rpm

import (
	"context"
	"fmt"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// logSink collects log lines from concurrent goroutines.
type logSink struct {
	mu sync.Mutex
	l  []string
}

func (s *logSink) add(line string) {
	s.mu.Lock()
	s.l = append(s.l, line)
	s.mu.Unlock()
}

func (s *logSink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.l...)
}

func (s *logSink) contains(sub string) bool {
	for _, l := range s.lines() {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// quick keeps a loopback run to a few seconds: the draft's 1 s interval
// scaled down; the algorithm is the same.
func quick(logs *logSink) Options {
	return Options{Insecure: true, MaxConns: 4, MaxStage: 3 * time.Second, Interval: 200 * time.Millisecond, Log: logs.add}
}

func measure(t *testing.T, wrap func(http.Handler) http.Handler) Result {
	t.Helper()
	res, _ := measureWith(t, wrap, nil)
	return res
}

// measureWith is measure with quick's options changed by set (nil: as
// they are), and its log.
func measureWith(t *testing.T, wrap func(http.Handler) http.Handler, set func(*Options)) (Result, *logSink) {
	t.Helper()
	s, err := NewServer(ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, wrap)
	logs := &logSink{}
	opts := quick(logs)
	if set != nil {
		set(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Measure(ctx, addr, opts)
	if err != nil {
		t.Fatalf("Measure: %v\nlog:\n%s", err, strings.Join(logs.lines(), "\n"))
	}
	t.Logf("RPM %.0f, down %+v, up %+v, notes %q", res.RPM, res.Download, res.Upload, res.Notes)
	if !logs.contains("rpm: config https://" + addr + "/.well-known/nq") {
		t.Errorf("config decision not logged: %q", logs.lines())
	}
	return res, logs
}

func TestMeasureLoopback(t *testing.T) {
	res := measure(t, nil)
	for _, st := range []Stage{res.Download, res.Upload} {
		if !(st.RPM > 0) || math.IsInf(st.RPM, 0) || st.Mbps <= 0 || st.Probes == 0 || st.Conns < 1 || st.Confidence == "" {
			t.Errorf("implausible stage %+v", st)
		}
		if st.Seconds > 5 {
			t.Errorf("stage ran %.1f s, limit 3 s", st.Seconds)
		}
	}
	if !(res.RPM > 0) || math.IsInf(res.RPM, 0) || res.DownloadMbps <= 0 || res.UploadMbps <= 0 {
		t.Errorf("implausible result %+v", res)
	}
	bb := res.BBResult()
	if bb.RPM != res.RPM || bb.DownloadMbps != res.DownloadMbps || bb.UploadMbps != res.UploadMbps || !strings.HasSuffix(bb.URL, pathWellKnown) {
		t.Errorf("BBResult %+v does not match %+v", bb, res)
	}
}

// The draft adds a load-generating connection at every interval, up to
// MNP, also once goodput is saturated: more connections than a saturated
// line needs are what reveal how much the path will buffer (a bloated
// modem that four window-limited uploads leave half empty fills with
// sixteen). A stage that ran past its saturation must end with more
// connections than it saturated with.
func TestMeasureAddsConnectionsPastSaturation(t *testing.T) {
	const maxConns = 16
	res, logs := measureWith(t, nil, func(o *Options) { o.MaxConns = maxConns })
	for _, st := range []struct {
		name string
		Stage
	}{{"download", res.Download}, {"upload", res.Upload}} {
		var conns int
		var after float64
		for _, l := range logs.lines() {
			if _, err := fmt.Sscanf(l, "rpm: "+st.name+" goodput stable at %f Mbit/s with %d connections after %f s", new(float64), &conns, &after); err == nil {
				break
			}
			conns = 0
		}
		if conns == 0 {
			// a busy host's loopback never settled in the stage: the
			// property is about what follows a saturation, so nothing to
			// judge (a quiet host's does saturate)
			tctest.Absorbed(t, "%s: no goodput saturation within the stage, nothing to judge: %q", st.name, logs.lines())
			continue
		}
		intervals := int((st.Seconds - after) / quick(logs).Interval.Seconds())
		if want := min(maxConns, conns+intervals-1); st.Conns < want {
			t.Errorf("%s: saturated with %d connections after %.1f s, ended with %d after %.1f s; want at least %d", st.name, conns, after, st.Conns, st.Seconds, want)
		}
	}
}

// An upload body's reads, each one DATA frame, keep to the connection's
// unsent mark less the headers it gains (recordHeaders), so a self probe
// waits behind at most that much of our own upload; with no mark (not yet
// connected, not Linux) the transport's buffer decides.
func TestZeroReaderKeepsToLimit(t *testing.T) {
	for _, tc := range []struct {
		mark int
		ok   bool
		want int
	}{{4344, true, 4344 - recordHeaders}, {1 << 20, true, 512 << 10}, {0, false, 512 << 10}} {
		var n atomic.Int64
		z := &zeroReader{n: &n, limit: func() (int, bool) { return tc.mark, tc.ok }}
		got, err := z.Read(make([]byte, 512<<10))
		if err != nil || got != tc.want || n.Load() != int64(tc.want) {
			t.Errorf("mark %d (%v): read %d, counted %d, %v; want %d", tc.mark, tc.ok, got, n.Load(), err, tc.want)
		}
	}
}

// A server that answers the 1-byte object at least 300 ms late must score
// what the draft's formula gives for that delay. Every probe waits ≥ 300 ms,
// so RPM ≤ (3/300 + 1/300)·30000 = 400. For the lower bound the test uses
// the delay the server really applied (timers fire late on a busy machine),
// plus 50 ms for the client's own overhead: RPM ≥ 120000/(delay+50). The
// older draft's latency average gives 90000/delay, below that bound for any
// delay over 150 ms, and a client that timed something other than the
// request would miss the delay entirely.
func TestMeasureDelayLowersRPM(t *testing.T) {
	const delay = 300 * time.Millisecond
	// The load is paced to 10 Mbit/s per connection, like a slow link, so
	// the client's own CPU (busy with gigabits of TLS on loopback) does not
	// add tens of milliseconds to every probe.
	const rate = 10e6 / 8
	var mu sync.Mutex
	var applied []time.Duration
	slowSmall := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case pathSmall:
				start := time.Now()
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
				}
				d := time.Since(start)
				mu.Lock()
				applied = append(applied, d)
				mu.Unlock()
			case pathLarge:
				w = &pacedWriter{ResponseWriter: w, p: pacer{rate: rate, start: time.Now()}}
			case pathUpload:
				r.Body = &pacedReader{ReadCloser: r.Body, p: pacer{rate: rate, start: time.Now()}}
			}
			h.ServeHTTP(w, r)
		})
	}
	res := measure(t, slowSmall)
	mu.Lock()
	var sum time.Duration
	for _, d := range applied {
		sum += d
	}
	appliedMs := ms(sum) / float64(len(applied))
	mu.Unlock()
	lo := 120000 / (appliedMs + 50)
	for _, st := range []Stage{res.Download, res.Upload} {
		if st.HTTPSelfMs < 300 || st.HTTPForeignMs < 300 {
			t.Errorf("probe times %.1f ms (self), %.1f ms (foreign) do not include the 300 ms delay", st.HTTPSelfMs, st.HTTPForeignMs)
		}
	}
	for name, v := range map[string]float64{"overall": res.RPM, "download": res.Download.RPM, "upload": res.Upload.RPM} {
		if v < lo || v > 400 {
			t.Errorf("%s RPM %.0f with a %.0f ms server delay, want %.0f…400", name, v, appliedMs, lo)
		}
	}
}

func TestMeasureRefusesUntrustedCertificate(t *testing.T) {
	_, addr := newTestServer(t, ServerConfig{})
	_, err := Measure(context.Background(), "https://"+addr+"/config", Options{})
	if err == nil || !strings.Contains(err.Error(), "--rpm-insecure") {
		t.Errorf("Measure against a self-signed server: %v, want a hint to --rpm-insecure", err)
	}
}

func TestMeasureReportsBusyServer(t *testing.T) {
	_, addr := newTestServer(t, ServerConfig{MaxLoad: 1})
	var logs logSink
	opts := quick(&logs)
	_, err := Measure(context.Background(), addr, opts)
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("Measure against a server with one load slot: %v, want the 429 reported", err)
	}
}

// pacer sleeps so that n bytes take at least n/rate seconds.
type pacer struct {
	rate  float64 // bytes per second
	start time.Time
	n     int
}

func (p *pacer) wait(n int) {
	p.n += n
	time.Sleep(time.Until(p.start.Add(time.Duration(float64(p.n) / p.rate * float64(time.Second)))))
}

type pacedWriter struct {
	http.ResponseWriter
	p pacer
}

func (w *pacedWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.p.wait(n)
	return n, err
}

type pacedReader struct {
	io.ReadCloser
	p pacer
}

func (r *pacedReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.p.wait(n)
	return n, err
}

// MaxRate holds the probes to that many pairs a second where PTC would
// allow more (loopback's goodput allows MPS), so a slow CPU is spared most
// of the TLS handshakes and a comparison probes as often as the other
// client (refserver.Compare): the server sees at most a foreign and a self
// GET per slot, a slot every 1/MaxRate s from each stage's start.
func TestMeasureKeepsToMaxRate(t *testing.T) {
	const rate = 4
	var small atomic.Int64
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == pathSmall {
				small.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	start := time.Now()
	res, _ := measureWith(t, count, func(o *Options) { o.MaxRate = rate })
	slots := 2 + rate*time.Since(start).Seconds() // each stage's probe loop starts at once
	if got := float64(small.Load()); got == 0 || got > 2*slots {
		t.Errorf("%v small GETs in %.1f s at --rpm-rate %d; want 1 to %.0f (a foreign and a self probe per slot)", got, time.Since(start).Seconds(), rate, 2*slots)
	}
	if res.Download.Probes == 0 || res.Upload.Probes == 0 {
		t.Errorf("probes %d/%d: want some in each stage", res.Download.Probes, res.Upload.Probes)
	}
}

// The client keeps its foreign probes (each a new connection in its
// handshake until its request) within the handshake cap of sqmkit's own
// server, with room for a load connection or two handshaking at once.
func TestForeignWithinServerCap(t *testing.T) {
	if maxInflight[0]+2 > handshakesPerClient {
		t.Errorf("%d foreign probes in flight against a server cap of %d connections in their handshake", maxInflight[0], handshakesPerClient)
	}
}

// A probe the server refuses (here every third one: 503) is a lost sample;
// the test goes on and reports how many it lost.
func TestMeasureCountsFailedProbesAsLost(t *testing.T) {
	var n atomic.Int64
	refuse := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == pathSmall && n.Add(1)%3 == 0 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	res := measure(t, refuse)
	if res.Download.Lost == 0 || res.Upload.Lost == 0 || !(res.RPM > 0) {
		t.Errorf("lost %d/%d probes, RPM %v; want some lost in each stage and a result", res.Download.Lost, res.Upload.Lost, res.RPM)
	}
	found := false
	for _, note := range res.Notes {
		found = found || strings.Contains(note, "counted as lost") && strings.Contains(note, "503")
	}
	if !found {
		t.Errorf("no note on the lost probes: %q", res.Notes)
	}
}

// A test cut short (the user's ^C, a deadline) still returns what it
// measured, marked as cut short.
func TestMeasureCutShortKeepsResult(t *testing.T) {
	// also when no loaded GET has returned: its waiting probes count, and
	// the stage is still said to be cut short (TestMeasureCountsWaitingSelfProbes)
	for name, wrap := range map[string]func(http.Handler) http.Handler{"answered": nil, "loaded GETs waiting": stallLoaded()} {
		s, err := NewServer(ServerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, s, wrap)
		var logs logSink
		opts := quick(&logs)
		// a stage needs at least four intervals to be stable: cut in the first
		opts.MaxStage, opts.Interval = time.Minute, time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
		res, err := Measure(ctx, addr, opts)
		cancel()
		if err == nil {
			t.Fatalf("%s: Measure past its deadline returned no error", name)
		}
		if res.Download.Confidence != "cut short" || res.Download.Mbps <= 0 || res.Download.Probes == 0 || !(res.RPM > 0) {
			t.Errorf("%s: cut short: %+v RPM %v, want the download measured so far", name, res.Download, res.RPM)
		}
	}
}

// A loaded GET that waits longer than the final window (a slow, bloated
// uplink shared by sixteen uploads) still counts, at its age so far:
// here the server never answers a 1-byte GET on a connection that carries
// the load, so no self probe returns. The stage reports a loaded latency
// of at least its waiting probes' ages, at low confidence, and says so,
// instead of failing the test or reporting only the foreign probes.
func TestMeasureCountsWaitingSelfProbes(t *testing.T) {
	res, _ := measureWith(t, stallLoaded(), nil)
	for _, st := range []struct {
		name string
		Stage
	}{{"download", res.Download}, {"upload", res.Upload}} {
		if st.Confidence != "low" || !(st.HTTPSelfMs >= 200) || math.IsNaN(st.RPM) || !(st.RPM > 0) {
			t.Errorf("%s: %+v; want a finite RPM at low confidence with loaded probes counted at their age (≥ one interval)", st.name, st.Stage)
		}
		if !strings.Contains(strings.Join(res.Notes, " "), st.name+": no loaded probe returned") {
			t.Errorf("%s: notes %q do not say the loaded probes were still waiting", st.name, res.Notes)
		}
	}
}

// stallLoaded never answers a 1-byte GET on a connection that carries a
// load: no self probe returns.
func stallLoaded() func(http.Handler) http.Handler {
	var mu sync.Mutex
	loaded := map[string]int{} // remote address → load streams open on it
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case pathLarge, pathUpload:
				mu.Lock()
				loaded[r.RemoteAddr]++
				mu.Unlock()
				defer func() { mu.Lock(); loaded[r.RemoteAddr]--; mu.Unlock() }()
			case pathSmall:
				mu.Lock()
				busy := loaded[r.RemoteAddr] > 0
				mu.Unlock()
				if busy {
					<-r.Context().Done()
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
}
