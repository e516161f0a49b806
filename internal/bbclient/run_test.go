package bbclient

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/bbserver"
)

func TestRunLoopback(t *testing.T) {
	// Thresholds are loose: on a busy two-core machine the probe goroutine
	// can miss most of its ticks; what matters here is that each phase
	// loads the right direction and every series is filled.
	for _, c := range []struct{ host, family string }{{"127.0.0.1", "ipv4"}, {"::1", "ipv6"}} {
		t.Run(c.family, func(t *testing.T) {
			addr := serve(t, c.host, bbserver.Config{MaxBytes: 1e15})
			var progress int
			cfg := shortConfig(addr)
			cfg.Progress = func(Progress) { progress++ }
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Family != c.family || res.ServerAddr != addr || res.Streams != 2 || res.ProbeInterval != 10 {
				t.Errorf("header: family %s addr %s streams %d interval %v", res.Family, res.ServerAddr, res.Streams, res.ProbeInterval)
			}
			want := []string{bbresult.PhaseIdleBefore, bbresult.PhaseDownload, bbresult.PhaseUpload, bbresult.PhaseBidir, bbresult.PhaseIdleAfter}
			if len(res.Phases) != len(want) {
				t.Fatalf("%d phases, want %d", len(res.Phases), len(want))
			}
			for i, p := range res.Phases {
				down := p.Name == bbresult.PhaseDownload || p.Name == bbresult.PhaseBidir
				up := p.Name == bbresult.PhaseUpload || p.Name == bbresult.PhaseBidir
				switch {
				case p.Name != want[i]:
					t.Errorf("phase %d is %s, want %s", i, p.Name, want[i])
				case down != (p.DownloadMbps > 1) || up != (p.UploadMbps > 1):
					t.Errorf("%s: down %.0f up %.0f Mbit/s", p.Name, p.DownloadMbps, p.UploadMbps)
				case p.Latency.N == 0 || p.ProbesSent < p.Latency.N:
					t.Errorf("%s: %d probe RTTs of %d sent", p.Name, p.Latency.N, p.ProbesSent)
				case (down || up) && (p.InFlow.N == 0 || p.Grade == ""):
					t.Errorf("%s: %d in-flow samples, grade %q", p.Name, p.InFlow.N, p.Grade)
				}
				if lost := p.LostUp + p.LostDown; lost*20 > p.ProbesSent {
					t.Errorf("%s: %d of %d probes lost on loopback", p.Name, lost, p.ProbesSent)
				}
			}
			if res.Grades.DSLReports == "" || res.Grades.Percentile == "" || len(res.Samples.Throughput) < 10 || progress == 0 {
				t.Errorf("grades %+v, %d throughput samples, %d progress calls", res.Grades, len(res.Samples.Throughput), progress)
			}
			// Per-stream goodput: one value per stream, each stream moving
			// data, summing to the direction's total.
			var withStreams int
			for _, s := range res.Samples.Throughput {
				for _, d := range []struct {
					total float64
					per   []float64
				}{{s.Download, s.DownloadStreams}, {s.Upload, s.UploadStreams}} {
					if d.per == nil {
						if d.total != 0 {
							t.Errorf("t=%.1f: %.0f Mbit/s without per-stream values", s.T, d.total)
						}
						continue
					}
					withStreams++
					var sum float64
					for _, v := range d.per {
						sum += v
					}
					if len(d.per) != cfg.Streams || math.Abs(sum-d.total) > 1e-6*d.total+1e-9 {
						t.Errorf("t=%.1f: streams %v sum to %.3f, total %.3f", s.T, d.per, sum, d.total)
					}
				}
			}
			if withStreams == 0 {
				t.Error("no sample has per-stream goodput")
			}
			for _, n := range res.Notes {
				if strings.Contains(n, "failed") {
					t.Error(n)
				}
			}
		})
	}
}

func TestRunRefused(t *testing.T) {
	addr := serve(t, "127.0.0.1", bbserver.Config{Token: "right"})
	cfg := shortConfig(addr)
	cfg.Token = "wrong"
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestRunBudget: when the server cuts the test short, the result says so
// instead of passing off a truncated run as a slow link.
func TestRunBudget(t *testing.T) {
	addr := serve(t, "127.0.0.1", bbserver.Config{MaxBytes: 50e6})
	res, err := Run(context.Background(), shortConfig(addr))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "ended the test early: byte budget") {
		t.Fatalf("notes: %q", res.Notes)
	}
	// Said once, with the budget and the phase it cut; the streams the
	// server closed on the way are not failures.
	var ended int
	for _, n := range res.Notes {
		if strings.Contains(n, "ended the test early") {
			ended++
			if !strings.Contains(n, "byte budget of 50 MB reached during download; download is incomplete") {
				t.Errorf("note %q lacks the budget or the phase", n)
			}
		}
		if strings.Contains(n, "streams failed") {
			t.Errorf("note %q: the server's end counted as stream failures", n)
		}
	}
	if ended != 1 {
		t.Errorf("%d notes on the early end: %q", ended, res.Notes)
	}
	// 50 MB go in well under a second on loopback: the client must stop
	// there rather than run the remaining phases against a closed session.
	if n := len(res.Phases); n == 0 || n > 3 {
		t.Errorf("%d phases after the server ended the test in the download phase", n)
	}
}

func TestConfigCheck(t *testing.T) {
	ok := shortConfig("h")
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Server = "" }, "no server"},
		{func(c *Config) { c.Upload = -time.Second }, "negative"},
		{func(c *Config) { c.Idle, c.Download, c.Upload, c.Bidir = 0, 0, 0, 0 }, "nothing to measure"},
		{func(c *Config) { c.Streams = 0 }, "--streams"},
		{func(c *Config) { c.ProbeInterval = time.Microsecond }, "--probe-interval"},
	} {
		cfg := ok
		c.mod(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	probesOnly := ok
	probesOnly.Download, probesOnly.Upload, probesOnly.Bidir, probesOnly.Streams = 0, 0, 0, 0
	if err := probesOnly.Check(); err != nil {
		t.Errorf("probe-only test: %v", err)
	}
}

func TestRunDialErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		server, network, want string
	}{
		{closed, "", "start 'sqmkit serve'"},
		{"no-such-host.invalid", "", `"no-such-host.invalid" does not resolve`},
		{"127.0.0.1:1", "tcp6", "127.0.0.1 has no IPv6 address: drop -6"},
		{"::1", "tcp4", "::1 has no IPv4 address: drop -4"},
	} {
		cfg := shortConfig(c.server)
		cfg.Network = c.network
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: error %v, want it to say %q", c.network, c.server, err, c.want)
		}
	}
}

func TestEndedNote(t *testing.T) {
	planned := []span{{name: "idle_before"}, {name: "download"}, {name: "upload"}, {name: "idle_after"}}
	for _, c := range []struct {
		ended  string
		budget int64
		ran    int
		want   string
	}{
		{bbproto.EndedBudget, 25e9, 2, "server ended the test early: byte budget of 25 GB reached during download; download is incomplete and upload, idle_after did not run"},
		{bbproto.EndedDuration, 25e9, 4, "server ended the test early: its time limit for this test reached during idle_after; idle_after is incomplete"},
		{bbproto.EndedBudget, 1500, 0, "server ended the test early: byte budget of 1500 bytes reached before the first phase; nothing was measured"},
		{"disk on fire", 0, 1, "server ended the test early: disk on fire during idle_before; idle_before is incomplete and download, upload, idle_after did not run"},
	} {
		if got := endedNote(c.ended, c.budget, planned, planned[:c.ran]); got != c.want {
			t.Errorf("endedNote(%q, %d, ran %d) =\n%s\nwant\n%s", c.ended, c.budget, c.ran, got, c.want)
		}
	}
}

func TestClosedByPeer(t *testing.T) {
	for err, want := range map[error]bool{
		io.EOF: true, fmt.Errorf("reading: %w", syscall.ECONNRESET): true, syscall.EPIPE: true,
		syscall.ECONNREFUSED: false, os.ErrDeadlineExceeded: false,
	} {
		if got := closedByPeer(err); got != want {
			t.Errorf("closedByPeer(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestReopen: a stream that ends early is opened again after the pause,
// as often as it ends, until the phase ends.
func TestReopen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		reopen(ctx, time.Millisecond, func(ctx context.Context) {
			if calls++; calls == 3 {
				cancel() // the phase ends while the third is open
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reopen did not return when its phase ended")
	}
	if calls != 3 {
		t.Errorf("%d runs of the stream, want 3 (two early ends, then the phase's end)", calls)
	}
}
