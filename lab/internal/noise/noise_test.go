package noise

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// foreignMs is the other processes' CPU per sample in the fake: 2 ms of a
// 2-CPU host's 20 ms per period, 10 %.
var foreignMs = []float32{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}

// busyMs is the two vCPUs' run time per sample in the fake: half their
// time, all of it in samples 4–6.
var busyMs = []float32{10, 10, 10, 10, 20, 20, 20, 10, 10, 10}

func writeSeries(dir, name string, v []float32) {
	b := make([]byte, 4*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
	}
	os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

// fake writes what Sample would have: one file per vCPU of steal values,
// other processes' CPU, and a clock that ticks, as the live sampler's does.
func fake(t *testing.T, steal ...[]float32) *Reader {
	dir := t.TempDir()
	start := time.Unix(1000, 0)
	os.WriteFile(filepath.Join(dir, startFile), fmt.Appendf(nil, "%d 2\n", start.UnixNano()), 0o644)
	writeSeries(dir, foreignFile, foreignMs)
	writeSeries(dir, busyFile, busyMs)
	for i, l := range steal {
		writeSeries(dir, fmt.Sprintf("cpu%d", i), l)
	}
	stop := tickClock(t, dir, 0)
	defer stop()
	r, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.start = start // the fake's host clock is this one
	return r
}

// tickClock rewrites dir's clock file every millisecond with this clock
// plus skew, as the host's sampler does with its own.
func tickClock(t *testing.T, dir string, skew time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			os.WriteFile(filepath.Join(dir, clockFile), fmt.Appendf(nil, "%020d", time.Now().Add(skew).UnixNano()), 0o644)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func TestWindow(t *testing.T) {
	r := fake(t,
		[]float32{0, 0.1, 0.1, 0.1, 3, 2, 1, 0.1, 0.1, 0.1},
		[]float32{0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2}, // its sampler got less far
	)
	at := func(k int) time.Time { return r.start.Add(time.Duration(k) * Period) }
	ms := float64(Period) / 1e6
	for _, tc := range []struct {
		name     string
		from, to int
		want     Stats
	}{
		{"quiet start", 1, 4, Stats{Samples: 6, Steal: 0.9 / 6 / ms, P99: 0.2, Max: 0.2, Foreign: 0.1, Busy: 0.5}},
		{"stall", 4, 7, Stats{Samples: 6, Steal: 6.6 / 6 / ms, P99: 2, Max: 3, Stalled: 2.0 / 6, Foreign: 0.1, Busy: 1}}, // exactly StallMs is not a stall
		{"all", 0, 10, Stats{Samples: 18, Steal: 8.0 / 18 / ms, P99: 2, Max: 3, Stalled: 2.0 / 18, Foreign: 0.1, Busy: 0.65}},
		{"before the start", -5, 1, Stats{Samples: 2, Foreign: 0.1, Busy: 0.5}},
		{"past the end", 20, 30, Stats{Missing: 1}},
		{"over the end", 5, 15, Stats{Samples: 8, Steal: 3.9 / 8 / ms, P99: 1, Max: 2, Stalled: 1.0 / 8, Foreign: 0.1, Busy: 0.7, Missing: 0.5}},
	} {
		got, err := r.Window(at(tc.from), at(tc.to))
		if err != nil || got.Samples != tc.want.Samples || !near(got.Missing, tc.want.Missing) || !near(got.Steal, tc.want.Steal) || !near(got.P99, tc.want.P99) ||
			!near(got.Max, tc.want.Max) || !near(got.Stalled, tc.want.Stalled) || !near(got.Foreign, tc.want.Foreign) || !near(got.Busy, tc.want.Busy) {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestSeries(t *testing.T) {
	r := fake(t, []float32{0.1, 0.1, 4, 0.1, 0.1, 0.1}, []float32{0.3, 0.1, 0.1, 0.1, 0.1, 2})
	ts, worst, err := r.Series(r.start, r.start.Add(6*Period), 2*Period)
	ms := float64(Period) / 1e6
	want := []float64{0.4 / 2 / ms, 4.1 / 2 / ms, 2.1 / 2 / ms} // the worse vCPU's share of each bin
	if err != nil || len(worst) != 3 || len(ts) != 3 {
		t.Fatalf("series %v %v %v, want 3 bins", ts, worst, err)
	}
	for i := range want {
		if !near(worst[i], want[i]) || !near(ts[i], float64(i)*2*Period.Seconds()) {
			t.Errorf("bin %d: t %v worst %v, want t %v worst %v", i, ts[i], worst[i], float64(i)*2*Period.Seconds(), want[i])
		}
	}
}

func TestOpen(t *testing.T) {
	if _, err := Open(t.TempDir(), 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Errorf("no sampler: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, startFile), []byte("garbage\n"), 0o644)
	if _, err := Open(dir, time.Second); err == nil {
		t.Error("bad start file, no error")
	}
	// a sampler that stopped: its clock never changes
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, startFile), []byte("5 2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, clockFile), fmt.Appendf(nil, "%020d", 7), 0o644)
	if _, err := Open(dir, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("stopped sampler: %v", err)
	}
	// the host's clock runs 3 s ahead: sample 0 is 3 s earlier here
	dir = t.TempDir()
	host := time.Now().Add(3 * time.Second)
	os.WriteFile(filepath.Join(dir, startFile), fmt.Appendf(nil, "%d 4\n", host.UnixNano()), 0o644)
	stop := tickClock(t, dir, 3*time.Second)
	r, err := Open(dir, time.Second)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	// the fake clock lags by however late its writer runs (a loaded CI read
	// tens of ms, and a busier host more); a missed correction is off by
	// the whole 3 s, so half of it tells them apart under any load
	if d := r.start.Sub(host.Add(-3 * time.Second)); d < -1500*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("clock offset off by %v", d)
	}
}

// fakeSource grows each vCPU's run_delay by (cpu+1) × 0.25 ms, its run
// time by (cpu+1) × 2 ms and the foreign CPU by 3 ms per read.
type fakeSource struct {
	mu         sync.Mutex
	run, delay []int64
	foreign    int64
}

func (f *fakeSource) VCPUs() int { return len(f.delay) }

func (f *fakeSource) Sched(cpu int) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay[cpu] += int64(cpu+1) * 250_000
	f.run[cpu] += int64(cpu+1) * 2_000_000
	return f.run[cpu], f.delay[cpu], nil
}

func (f *fakeSource) Foreign() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.foreign += 3_000_000
	return f.foreign, nil
}

// Sample writes one value per Period per vCPU (the growth of its
// run_delay) and one of the foreign CPU, in ms.
func TestSample(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	done := make(chan error)
	go func() { done <- Sample(dir, &fakeSource{run: []int64{0, 0}, delay: []int64{0, 0}}, stop) }()
	r, err := Open(dir, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * Period)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	per, err := r.PerCPU(r.start, time.Now().Add(time.Second))
	if err != nil || len(per) != 2 || len(per[0]) < 10 {
		t.Fatalf("per vCPU %v %v", per, err)
	}
	for cpu, s := range per {
		for k, v := range s {
			if !near(v, float64(cpu+1)*0.25) {
				t.Fatalf("vCPU %d sample %d: %v ms, want %v", cpu, k, v, float64(cpu+1)*0.25)
			}
		}
	}
	st, err := r.Window(r.start, r.start.Add(10*Period))
	if want := 3.0 / (float64(Period) / 1e6 * float64(r.hostCPUs)); err != nil || !near(st.Foreign, want) {
		t.Errorf("foreign %v (%v), want %v", st.Foreign, err, want)
	}
	if want := 3.0 / (float64(Period) / 1e6); !near(st.Busy, want) {
		t.Errorf("busy %v, want %v (2 and 4 ms of each vCPU's %v)", st.Busy, want, Period)
	}
	if want := 4.0 / (float64(Period) / 1e6); !near(st.Busiest, want) {
		t.Errorf("busiest %v, want %v (vCPU 1's 4 ms of %v)", st.Busiest, want, Period)
	}
}

// The live source's readers, on a real process: a process without vCPU
// threads is named as such, and the host's counters only grow.
func TestLive(t *testing.T) {
	c := exec.Command("sleep", "5")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	if _, err := NewQEMU(c.Process.Pid); err == nil || !strings.Contains(err.Error(), "debug-threads") {
		t.Errorf("sleep has no vCPU threads: %v", err)
	}
	// this goroutine's thread stands in for a vCPU thread
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	q := &QEMU{pid: os.Getpid(), tids: []int{syscall.Gettid()}}
	ra, a, err := q.Sched(0)
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	fa, err := q.Foreign()
	if err != nil {
		t.Fatal(err)
	}
	// spin until the thread has run 10 ms by its own CPU clock, however
	// much of the wall clock a loaded host takes for that: the reader must
	// then say it ran at least as long (issue #73: 50 ms of wall time once
	// gave the thread 9.7 ms)
	var cpu0, cpu unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &cpu0)
	spun := time.Now()
	defer func() {
		if wall := time.Since(spun); wall > 100*time.Millisecond {
			tctest.Absorbed(t, "10 ms of the thread's CPU took %v of wall time", wall)
		}
	}()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &cpu); cpu.Nano()-cpu0.Nano() >= int64(10*time.Millisecond) {
			break
		}
	}
	ran := time.Duration(cpu.Nano() - cpu0.Nano())
	rb, b, _ := q.Sched(0)
	fb, err := q.Foreign()
	if err != nil || b < a || fb < fa-int64(time.Second) {
		t.Errorf("run_delay %d then %d, foreign %d then %d (%v)", a, b, fa, fb, err)
	}
	// schedstat's sum may leave out the slice running as it is read (up to a
	// tick), so half of what the thread's clock says is the bound
	if ran < 10*time.Millisecond || time.Duration(rb-ra) < ran/2 {
		t.Errorf("a thread that ran %v by its own clock: schedstat says %v", ran, time.Duration(rb-ra))
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestHostBusy(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       int64
		err        bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"steal counts", "cpu  100 10 20 5000 30 1 2 40 0 0\ncpu0 1 2 3\n", 100 + 10 + 20 + 1 + 2 + 40, false},
		{"no steal column", "cpu  100 10 20 5000 30 1 2\n", 133, false},
		{"idle and iowait do not", "cpu  0 0 0 9999 9999 0 0 0 0 0\n", 0, false},
		{"not the summary line", "cpu0 1 2 3 4 5 6 7 8\n", 0, true},
		{"garbage", "cpu  1 2 x 4 5 6 7 8\n", 0, true},
	} {
		got, err := hostBusy(tc.stat)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// A sampler that runs late (here every reading comes three periods after
// the last) still writes sample k for the period at start+k×Period, each
// reading's growth spread over the periods it covers: counting ticks
// instead put the samples behind the clock and left later windows empty.
func TestSampleLate(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(2000, 0)
	var mu sync.Mutex
	calls := 0
	now := func() time.Time { // start, then two calls per reading
		mu.Lock()
		defer mu.Unlock()
		calls++
		return base.Add(time.Duration(3*(calls/2)) * Period)
	}
	stop, done := make(chan struct{}), make(chan error)
	go func() {
		done <- sample(dir, &fakeSource{run: []int64{0, 0}, delay: []int64{0, 0}}, stop, now)
	}()
	stopClock := tickClock(t, dir, 0)
	r, err := Open(dir, 2*time.Second)
	stopClock()
	if err != nil {
		t.Fatal(err)
	}
	r.start = base
	time.Sleep(20 * Period)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	per, err := r.PerCPU(base, base.Add(9*Period))
	if err != nil || len(per) != 2 || len(per[0]) != 9 {
		t.Fatalf("per vCPU %v %v, want 9 samples each", per, err)
	}
	for cpu, s := range per {
		for k, v := range s {
			if want := float64(cpu+1) * 0.25 / 3; !near(v, want) {
				t.Fatalf("vCPU %d sample %d: %v ms, want %v", cpu, k, v, want)
			}
		}
	}
	st, err := r.Window(base, base.Add(9*Period))
	if err != nil || st.Missing != 0 || !near(st.Busy, 3.0/3/(float64(Period)/1e6)) || !near(st.Busiest, 4.0/3/(float64(Period)/1e6)) {
		t.Errorf("window %+v %v: want no period missing, busy and busiest a third of the fake's per-reading run", st, err)
	}
}
