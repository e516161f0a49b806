//go:build !router

package rpm

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// TestRunPhasesWires: sqmkit test's phases against sqmkit's own
// responsiveness server over both wires. Each loaded phase moves bytes
// the way it says, the TCP handshakes are graded; HTTP/2 adds the in-flow
// GETs and the RPM, and HTTP/1.1 (the router build's) says it has
// neither, keeping each load on its connection (at most one per stream and
// POST series, not one per object). Over HTTP/2 h2Uploads uploads run per
// stream asked, since the server's flow control caps each one's bytes in
// flight, on the same connections; over HTTP/1.1 one.
func TestRunPhasesWires(t *testing.T) {
	setUploadSize(t, 1<<20) // several POSTs a phase on loopback
	for _, http1 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http2", true: "http1"}[http1], func(t *testing.T) {
			s, err := NewServer(ServerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			posts, conns, active, most := 0, map[string]bool{}, map[string]int{}, 0
			addr := startServer(t, s, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == pathUpload {
						mu.Lock()
						posts++
						conns[r.RemoteAddr] = true
						active[r.RemoteAddr]++
						most = max(most, active[r.RemoteAddr])
						mu.Unlock()
						defer func() { mu.Lock(); active[r.RemoteAddr]--; mu.Unlock() }()
					}
					h.ServeHTTP(w, r)
				})
			})
			var logs logSink
			cfg := bbclient.Config{Server: "https://" + addr + pathConfig, Idle: time.Second, Download: 2 * time.Second,
				Upload: 2 * time.Second, Bidir: 2 * time.Second, Streams: 2, ProbeInterval: bbclient.DefaultProbeInterval, Log: logs.add}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := RunPhases(ctx, PhaseConfig{Test: cfg, Insecure: true, HTTP1: http1})
			if err != nil {
				t.Fatalf("RunPhases: %v\n%s", err, strings.Join(logs.lines(), "\n"))
			}
			for _, ph := range res.Phases {
				down := ph.Name == bbresult.PhaseDownload || ph.Name == bbresult.PhaseBidir
				up := ph.Name == bbresult.PhaseUpload || ph.Name == bbresult.PhaseBidir
				if (ph.DownloadMbps > 1) != down || (ph.UploadMbps > 1) != up || (ph.Grade == "") == (up || down) {
					t.Errorf("phase %s: %.1f down, %.1f up Mbit/s, grade %q", ph.Name, ph.DownloadMbps, ph.UploadMbps, ph.Grade)
				}
			}
			notes := strings.Join(res.Notes, "\n")
			if http1 {
				if len(res.Samples.InFlow) != 0 || res.RPM != nil || !strings.Contains(notes, "over HTTP/1.1") {
					t.Errorf("HTTP/1.1: %d in-flow, RPM %+v, notes %q", len(res.Samples.InFlow), res.RPM, res.Notes)
				}
				mu.Lock()
				if posts <= len(conns) || len(conns) > 2*cfg.Streams {
					t.Errorf("%d POSTs on %d connections: want more POSTs than connections, at most %d connections", posts, len(conns), 2*cfg.Streams)
				}
				mu.Unlock()
			} else if len(res.Samples.InFlow) == 0 || res.RPM == nil || strings.Contains(notes, "HTTP/1.1") {
				t.Errorf("HTTP/2: %d in-flow, RPM %+v, notes %q", len(res.Samples.InFlow), res.RPM, res.Notes)
			}
			if res.Incomplete != "" {
				t.Errorf("incomplete: %s", res.Incomplete)
			}
			// per connection: a phase's uploads may still be ending on
			// its connections while the next phase's start on new ones
			want := 1
			if !http1 {
				want = h2Uploads
			}
			mu.Lock()
			if most != want || !http1 && most < 2 || len(conns) > 2*cfg.Streams {
				t.Errorf("%d uploads at once on a connection (%d connections), want %d (over HTTP/2 several) on at most %d connections", most, len(conns), want, 2*cfg.Streams)
			}
			mu.Unlock()
		})
	}
}

// TestForeignGradesKernelRTT: each wire's foreign probe carries the
// kernel's handshake time beside its own (sockopt.HandshakeRTT), and a
// phase grades the kernel's while the RPM keeps the process's, as the
// draft's clients take it.
func TestForeignGradesKernelRTT(t *testing.T) {
	s, err := NewServer(ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, http1 := range []bool{false, true} {
		w := newWire(PhaseConfig{Insecure: true, HTTP1: http1}, func(string) {})
		if _, err := w.fetchConfig(ctx, "https://"+addr+pathConfig); err != nil {
			t.Fatal(err)
		}
		f, err := w.foreign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Path <= 0 || f.Path > f.TCP {
			t.Errorf("HTTP/1.1 %v: kernel's handshake %v, the process's %v: want the kernel's, within the process's", http1, f.Path, f.TCP)
		}
	}

	start := time.Now()
	p := &phaseRun{w: fixedForeign{foreignTimes{Start: start, TCP: 50 * time.Millisecond, Path: 20 * time.Millisecond}}, start: start, loaded: true}
	p.foreign(ctx)
	if len(p.probes) != 1 || p.probes[0].RTT != 20*time.Millisecond || len(p.loadedLat.TCP) != 1 || p.loadedLat.TCP[0] != 50 {
		t.Errorf("graded %+v, RPM's handshakes %v: want the kernel's 20ms graded and the process's 50ms for the RPM", p.probes, p.loadedLat.TCP)
	}
}

// fixedForeign is a wire whose foreign probe returns f.
type fixedForeign struct{ f foreignTimes }

func (w fixedForeign) fetchConfig(context.Context, string) (endpoints, error) {
	return endpoints{}, nil
}
func (w fixedForeign) foreign(context.Context) (foreignTimes, error) { return w.f, nil }
func (w fixedForeign) newLoad(bool) load                             { return nil }
func (w fixedForeign) multiplexed() bool                             { return false }
