package rpm

// The latency probes of a stage: foreign probes on fresh connections and
// self probes on the load's own (the draft's two kinds).

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"time"
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
	tr := r.m.transport(nil)
	defer tr.CloseIdleConnections()
	var connStart, connDone, tlsStart, tlsDone, gotConn time.Time
	var version uint16
	trace := &httptrace.ClientTrace{
		ConnectStart:      func(string, string) { connStart = time.Now() },
		ConnectDone:       func(string, string, error) { connDone = time.Now() },
		TLSHandshakeStart: func() { tlsStart = time.Now() },
		TLSHandshakeDone: func(cs tls.ConnectionState, _ error) {
			tlsDone, version = time.Now(), cs.Version
		},
		GotConn: func(httptrace.GotConnInfo) { gotConn = time.Now() },
	}
	_, _, err := get(httptrace.WithClientTrace(r.ctx, trace), &http.Client{Transport: tr}, r.m.eps.Small.String(), 1<<10)
	if err != nil {
		r.probeFailed(fmt.Errorf("foreign probe: %w", err))
		return
	}
	end := time.Now()
	// TLS 1.2 needs two round trips before data can flow, 1.3 one.
	rtts := 1.0
	if version < tls.VersionTLS13 {
		rtts = 2
	}
	r.record(func(l *latencies) {
		l.TCP = append(l.TCP, ms(connDone.Sub(connStart)))
		l.TLS = append(l.TLS, ms(tlsDone.Sub(tlsStart))/rtts)
		l.HTTPForeign = append(l.HTTPForeign, ms(end.Sub(gotConn)))
	})
}

// selfProbe times a 1-byte GET multiplexed onto a random load connection.
func (r *run) selfProbe() {
	r.mu.Lock()
	var ready []*loader
	for _, l := range r.loaders {
		if l.ready.Load() {
			ready = append(ready, l)
		}
	}
	r.mu.Unlock()
	if len(ready) == 0 {
		return
	}
	l := ready[rand.IntN(len(ready))]
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	start := time.Now()
	_, _, err := get(httptrace.WithClientTrace(r.ctx, trace), l.client, r.m.eps.Small.String(), 1<<10)
	if err != nil {
		r.probeFailed(fmt.Errorf("self probe: %w", err))
		return
	}
	d := time.Since(start)
	if !reused {
		return // the load connection was gone; this timed a new one, not a loaded one
	}
	r.record(func(l *latencies) { l.HTTPSelf = append(l.HTTPSelf, ms(d)) })
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
