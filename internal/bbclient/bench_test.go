package bbclient

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/bbserver"
)

// BenchmarkLoopback checks that the tester is never the bottleneck: client
// and server in one process on loopback, 4 streams each way in turn.
// Targets: ≥ 5 Gbit/s per direction, idle probe RTT p50 ≤ 0.2 ms.
func BenchmarkLoopback(b *testing.B) {
	addr := serve(b, "127.0.0.1", bbserver.Config{MaxBytes: 1e15})
	var down, up, idle float64
	for range b.N {
		res, err := Run(context.Background(), Config{Server: addr, Idle: time.Second, Download: 3 * time.Second,
			Upload: 3 * time.Second, Streams: 4, ProbeInterval: DefaultProbeInterval})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range res.Phases {
			switch p.Name {
			case bbresult.PhaseDownload:
				down += p.DownloadMbps / 1e3
			case bbresult.PhaseUpload:
				up += p.UploadMbps / 1e3
			}
		}
		idle += res.IdleRTT
	}
	b.ReportMetric(down/float64(b.N), "down-Gbit/s")
	b.ReportMetric(up/float64(b.N), "up-Gbit/s")
	b.ReportMetric(idle/float64(b.N), "idle-p50-ms")
}

// BenchmarkServerMemory runs 200 probe-only clients and 20 full tests at
// once against a server in its own process and reports that process's
// peak RSS (VmHWM). Target: ≤ 100 MB.
func BenchmarkServerMemory(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		srv := exec.Command(self)
		srv.Env = append(os.Environ(), helperEnv+"=server", "BBTEST_LISTEN=127.0.0.1:0")
		out, _ := srv.StdoutPipe()
		srv.Stderr = os.Stderr
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if !ok {
			b.Fatalf("server: %q", line)
		}
		var wg sync.WaitGroup
		var failed atomic.Int32
		var firstErr atomic.Value
		run := func(cfg Config) {
			if _, err := Run(context.Background(), cfg); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(Config{Server: addr, Idle: 3 * time.Second, ProbeInterval: DefaultProbeInterval})
			}()
		}
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(Config{Server: addr, Idle: 500 * time.Millisecond, Download: time.Second, Upload: time.Second,
					Bidir: time.Second, Streams: 4, ProbeInterval: DefaultProbeInterval})
			}()
		}
		wg.Wait()
		hwm, err := vmHWM(srv.Process.Pid)
		srv.Process.Kill()
		srv.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if n := failed.Load(); n > 0 {
			b.Fatalf("%d of 220 tests failed, first: %v", n, firstErr.Load())
		}
		b.ReportMetric(hwm/1e6, "server-peak-RSS-MB")
	}
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
