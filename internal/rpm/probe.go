//go:build !router

package rpm

// The latency probes of a stage: foreign probes on fresh connections and
// self probes on the load's own (the draft's two kinds).

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// probeLoop starts a foreign and a self probe at the current rate, spread
// evenly, skipping a slot when too many probes are still outstanding.
func (r *run) probeLoop() {
	defer r.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		t.Reset(time.Duration(float64(time.Second) / r.rate))
		r.mu.Unlock()
		for i, probe := range []func(){r.foreignProbe, r.selfProbe} {
			select {
			case r.inflight[i] <- struct{}{}:
			default:
				continue
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer func() { <-r.inflight[i] }()
				probe()
			}()
		}
	}
}

// foreignProbe times a new connection: TCP handshake, TLS handshake per
// round trip, and a 1-byte GET on it.
func (r *run) foreignProbe() {
	f, err := r.m.foreign(r.ctx)
	if err != nil {
		r.probeFailed(fmt.Errorf("foreign probe: %w", err))
		return
	}
	r.record(func(l *latencies) {
		l.TCP = append(l.TCP, ms(f.TCP))
		l.TLS = append(l.TLS, ms(f.TLS))
		l.HTTPForeign = append(l.HTTPForeign, ms(f.HTTP))
	})
}

// foreign runs one foreign probe.
func (m *measurer) foreign(ctx context.Context) (foreignTimes, error) {
	var f foreignTimes
	var connDone, tlsStart, tlsDone, gotConn time.Time
	// the kernel's sample is read as the dial returns, before TLS adds others
	tr := m.transport(func(c net.Conn) { f.Path = sockopt.HandshakeRTT(c, connDone.Sub(f.Start)) }, false)
	defer tr.CloseIdleConnections()
	var version uint16
	trace := &httptrace.ClientTrace{
		ConnectStart:      func(string, string) { f.Start = time.Now() },
		ConnectDone:       func(_, addr string, _ error) { connDone, f.Addr = time.Now(), addr },
		TLSHandshakeStart: func() { tlsStart = time.Now() },
		TLSHandshakeDone: func(cs tls.ConnectionState, _ error) {
			tlsDone, version = time.Now(), cs.Version
		},
		GotConn: func(httptrace.GotConnInfo) { gotConn = time.Now() },
	}
	_, _, err := get(httptrace.WithClientTrace(ctx, trace), m.client(tr), m.eps.Small.String(), 1<<10)
	if err != nil {
		return f, err
	}
	f.TCP, f.TLS, f.HTTP = connDone.Sub(f.Start), perRoundTrip(tlsDone.Sub(tlsStart), version), time.Since(gotConn)
	return f, nil
}

// selfProbe times a 1-byte GET multiplexed onto a random load connection.
func (r *run) selfProbe() {
	l, ok := readyOne(&r.mu, func() []*loader { return r.loaders }, func(l *loader) bool { return l.ready.Load() })
	if !ok {
		return
	}
	defer r.waiting.start()()
	d, reused, err := r.m.self(r.ctx, l)
	if err != nil {
		r.probeFailed(fmt.Errorf("self probe: %w", err))
		return
	}
	if reused {
		r.record(func(l *latencies) { l.HTTPSelf = append(l.HTTPSelf, ms(d)) })
	}
}

// self times a 1-byte GET on load connection l; reused is false when the
// connection was gone and the GET timed a new one, not a loaded one.
func (m *measurer) self(ctx context.Context, l *loader) (d time.Duration, reused bool, err error) {
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	start := time.Now()
	if _, _, err = get(httptrace.WithClientTrace(ctx, trace), l.client, m.eps.Small.String(), 1<<10); err != nil {
		return 0, false, err
	}
	return time.Since(start), reused, nil
}

// waiting holds the start of each self probe that has not returned. On a
// slow, bloated uplink a loaded GET can wait longer than the final window
// (sixteen uploads share 1 Mbit/s behind 800 ms of buffer: lab-notes), and
// a window of only the probes fast enough to return would have no loaded
// figure at all, or a flattering one; those still waiting are counted at
// their age instead (TestMeasureCountsWaitingSelfProbes).
type waiting struct {
	mu sync.Mutex
	n  int
	at map[int]time.Time
}

// start registers a probe and returns the func that deregisters it.
func (w *waiting) start() func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[int]time.Time{}
	}
	w.n++
	id := w.n
	w.at[id] = time.Now()
	return func() {
		w.mu.Lock()
		delete(w.at, id)
		w.mu.Unlock()
	}
}

// ages are the waiting probes' ages so far, in milliseconds.
func (w *waiting) ages() []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var a []float64
	for _, t := range w.at {
		a = append(a, ms(time.Since(t)))
	}
	return a
}
