package autorate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
)

// fakeShaper records what the daemon sets.
type fakeShaper struct {
	mu      sync.Mutex
	rates   config.Rates
	sets    []config.Rates
	resyncs int
	fail    bool
}

func (f *fakeShaper) Set(r config.Rates) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("refused")
	}
	if r.Download > 0 {
		f.rates.Download = r.Download
	}
	if r.Upload > 0 {
		f.rates.Upload = r.Upload
	}
	f.sets = append(f.sets, f.rates)
	return nil
}

func (f *fakeShaper) Resync() (config.Rates, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resyncs++
	return f.rates, nil
}

func (f *fakeShaper) Rates() config.Rates {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rates
}

// script is a Source that answers every probe at once with the delay its
// function returns.
type script struct {
	ms   func() (float64, bool) // ok false: silence
	stop error
}

func (s *script) Name() string { return "script" }

func (s *script) Run(ctx context.Context) error {
	if s.stop != nil {
		return s.stop
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *script) Probe(now time.Time, out []Raw) []Raw {
	if ms, ok := s.ms(); ok {
		out = append(out, Raw{At: now, Path: "up", Ms: 20 + ms, Dir: config.Upload}, Raw{At: now, Path: "down", Ms: 20 + ms, Dir: config.Download})
	}
	return out
}

// sysfs is a fake /sys with the two devices' counters.
type sysfs struct {
	root string
}

func (s sysfs) set(dev string, bytes uint64, ifindex int) {
	d := filepath.Join(s.root, "sys/class/net", dev)
	os.MkdirAll(filepath.Join(d, "statistics"), 0o755)
	os.WriteFile(filepath.Join(d, "statistics/tx_bytes"), []byte(fmt.Sprintf("%d\n", bytes)), 0o644)
	os.WriteFile(filepath.Join(d, "ifindex"), []byte(fmt.Sprintf("%d\n", ifindex)), 0o644)
}

func fastParams() Params {
	p := params()
	p.Interval, p.Move, p.Refractory, p.Settle, p.Stall = 10*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond
	p.Silence = 150 * time.Millisecond
	return p
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }
func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logs) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// The daemon end to end on fakes: it starts at the base rates, raises a
// loaded link, cuts on bloat with a typed log line, finds a re-created
// device's tree again, and leaves the base rates behind when stopped.
func TestDaemon(t *testing.T) {
	fs := sysfs{t.TempDir()}
	var bloat atomic.Bool
	src := &script{ms: func() (float64, bool) {
		if bloat.Load() {
			return 80, true
		}
		return 1, true
	}}
	sh := &fakeShaper{}
	l := &logs{}
	d := &Daemon{Shaper: sh, Devices: [2]string{"ifb4wan", "wan"}, Root: fs.root, Params: fastParams(), Source: src, Log: l.add,
		Probe: 5 * time.Millisecond, Summary: 50 * time.Millisecond, StatusFile: StatusPath(fs.root, "wan"), StatusEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// traffic at the shaper's rate, by the clock (a busy host's sleeps
	// run long): loaded; pump runs until done says so, or for at most dur
	var tx [2]uint64
	pump := func(dur time.Duration, ifindex int, done func() bool) {
		last := time.Now()
		for end := last.Add(dur); time.Now().Before(end) && !done(); {
			time.Sleep(10 * time.Millisecond)
			r, now := sh.Rates(), time.Now()
			ms := uint64(now.Sub(last).Milliseconds())
			last = now
			tx[0] += uint64(r.Download) * ms / 8
			tx[1] += uint64(r.Upload) * ms / 8
			fs.set("ifb4wan", tx[0], ifindex)
			fs.set("wan", tx[1], ifindex+1)
		}
	}
	raised := func() bool { r := sh.Rates(); return r.Download > 20000 && r.Upload > 5000 }
	pump(10*time.Second, 5, raised)
	if !raised() {
		t.Errorf("loaded without delay, rates %+v did not rise above the base 20000/5000", sh.Rates())
	}
	// the status file shows the raised rates before the bloat comes (a
	// fast host raises and cuts between two status writes otherwise)
	high := sh.Rates()
	inHistory := func() bool {
		var st Status
		b, _ := os.ReadFile(StatusPath(fs.root, "wan"))
		return json.Unmarshal(b, &st) == nil && slices.ContainsFunc(st.History, func(p Point) bool { return p.Rate == [2]int{high.Download, high.Upload} })
	}
	pump(10*time.Second, 5, func() bool { return sh.Rates() != high || inHistory() })
	if high = sh.Rates(); !inHistory() {
		t.Errorf("the status history never showed the raised rates %+v", high)
	}
	bloat.Store(true)
	pump(10*time.Second, 5, func() bool { return sh.Rates().Download < high.Download && l.has("bloat") })
	if r := sh.Rates(); r.Download >= high.Download || !l.has("change dir=download") || !l.has("bloat") {
		t.Errorf("bloat: rates %+v (were %+v); log:\n%s", r, high, l)
	}
	bloat.Store(false)
	// the WAN device goes away and comes back as a new device (PPPoE)
	os.RemoveAll(filepath.Join(fs.root, "sys/class/net/wan"))
	time.Sleep(100 * time.Millisecond)
	resynced := func() int { sh.mu.Lock(); defer sh.mu.Unlock(); return sh.resyncs }
	pump(10*time.Second, 9, func() bool { return resynced() > 0 && l.has("shaper found again") })
	resyncs := resynced()
	if resyncs == 0 || !l.has("waiting for it") || !l.has("shaper found again") {
		t.Errorf("re-created device: %d resyncs, log:\n%s", resyncs, l)
	}
	if !l.has("summary download=") {
		t.Errorf("no summary line:\n%s", l)
	}
	m := &strings.Builder{}
	d.Metrics.Write(m)
	if !strings.Contains(m.String(), `sqmkit_autorate_rate_bits_per_second{direction="download"}`) || !strings.Contains(m.String(), "sqmkit_autorate_changes_total") {
		t.Errorf("metrics:\n%s", m)
	}
	// the status file's history has its points (one each StatusEvery)
	pump(10*time.Second, 9, func() bool {
		var st Status
		b, _ := os.ReadFile(StatusPath(fs.root, "wan"))
		return json.Unmarshal(b, &st) == nil && len(st.History) >= 5
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := sh.Rates(); r != (config.Rates{Download: 20000, Upload: 5000}) {
		t.Errorf("stopped at %+v, want the base 20000/5000", r)
	}
	checkStatusFile(t, StatusPath(fs.root, "wan"))
	for _, s := range sh.sets {
		if s.Download < 5000 || s.Download > 60000 || s.Upload < 2000 || s.Upload > 15000 {
			t.Errorf("set %+v outside the bounds", s)
		}
	}
}

// A source that gives up ends the daemon with its error.
func TestDaemonSourceStops(t *testing.T) {
	fs := sysfs{t.TempDir()}
	fs.set("ifb4wan", 0, 1)
	fs.set("wan", 0, 2)
	d := &Daemon{Shaper: &fakeShaper{}, Devices: [2]string{"ifb4wan", "wan"}, Root: fs.root, Params: fastParams(),
		Source: &script{ms: func() (float64, bool) { return 0, true }, stop: errors.New("no ICMP socket")}}
	err := d.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no ICMP socket") {
		t.Errorf("got %v", err)
	}
}

// TestMetricsBaseUnits: every metric is named in Prometheus' base units
// (bits per second, seconds; promtool check metrics flags _kbps and _ms),
// with the value converted to match.
func TestMetricsBaseUnits(t *testing.T) {
	m := &Metrics{CPU: func() (cpuload.Record, bool) {
		return cpuload.Record{At: time.Unix(1700000000, 0), Qdisc: "cake", Phases: []bbresult.PhaseCPU{{Phase: "download", MsPerMbit: 3.5, Busiest: 1, BusiestShare: 0.625, CeilingMbps: 64}}}, true
	}}
	m.rate, m.load = [2]int{40000, 8000}, [2]int{1000, 0}
	m.sample(Raw{Path: "192.0.2.1", Ms: 25}, 5)
	var b strings.Builder
	m.Write(&b)
	out := b.String()
	for _, want := range []string{
		`sqmkit_autorate_rate_bits_per_second{direction="download"} 40000000`,
		`sqmkit_autorate_load_bits_per_second{direction="download"} 1000000`,
		`sqmkit_autorate_added_delay_seconds{path="192.0.2.1"} 0.00500`,
		`sqmkit_autorate_baseline_seconds{path="192.0.2.1"} 0.02000`,
		`sqmkit_cpu_ceiling_bits_per_second{phase="download",qdisc="cake"} 64000000`,
		`sqmkit_cpu_seconds_per_bit{phase="download",qdisc="cake"} 3.5e-09`,
		`sqmkit_cpu_busiest_core_ratio{phase="download",cpu="1"} 0.625`,
		`sqmkit_cpu_measured_timestamp_seconds 1700000000`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE ")
		name, _, _ = strings.Cut(name, " ")
		name, _, _ = strings.Cut(name, "{")
		if strings.HasSuffix(name, "_ms") || strings.HasSuffix(name, "_kbps") {
			t.Errorf("not a base unit: %s", l)
		}
	}
}

// checkStatusFile: the status file holds the bounds and the last minutes,
// one point per StatusEvery, up to historyPoints, each with its added
// delay (TestDaemon checks the raised rates reached it while they held).
func checkStatusFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if st.Min != fastParams().Min || st.Max != fastParams().Max || len(st.History) < 5 || len(st.History) > historyPoints {
		t.Fatalf("status %+v with %d points", st, len(st.History))
	}
	for _, p := range st.History {
		if len(p.Added) == 0 {
			t.Errorf("point %+v has no added delay", p)
		}
	}
}

// TestStatusFile: the history keeps the last historyPoints, and each write
// replaces the file whole (no temp file left beside it).
func TestStatusFile(t *testing.T) {
	dir := t.TempDir()
	d := &Daemon{Params: fastParams(), Metrics: &Metrics{}, StatusFile: StatusPath(dir, "wan")}
	c, err := New(d.Params, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	for i := range historyPoints + 10 {
		if err := d.record(&st, c, [2]int{i, i}, time.Unix(int64(i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	var back Status
	b, _ := os.ReadFile(d.StatusFile)
	if err := json.Unmarshal(b, &back); err != nil || len(back.History) != historyPoints || back.History[0].T != 10 || back.Load != [2]int{historyPoints + 9, historyPoints + 9} {
		t.Errorf("%d points from t=%d, load %v, err %v", len(back.History), back.History[0].T, back.Load, err)
	}
	if _, err := os.Stat(d.StatusFile + ".tmp"); err == nil {
		t.Error("temp file left")
	}
}
