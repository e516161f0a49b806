package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/history"
)

// fakeLink is a shaped queue on a clock of its own: each probe tick moves
// the clock step on, the shaper's devices count load × rate over it, and
// the probe's round trip is the base plus added.
type fakeLink struct {
	mu          sync.Mutex
	root        string
	now         time.Time
	step        time.Duration
	load        [2]float64 // share of the rate, after the first quiet minutes
	added       float64
	quiet       int // probes of an idle link first (the baseline)
	rates       [2]int
	bytes       [2]float64
	probes, end int
	cancel      func()
}

func (f *fakeLink) Name() string                  { return "fake" }
func (f *fakeLink) Run(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (f *fakeLink) Probe(now time.Time, out []autorate.Raw) []autorate.Raw {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probes++; f.probes >= f.end {
		f.cancel()
	}
	added := f.added
	if f.probes <= f.quiet {
		added = 0
	}
	return append(out, autorate.Raw{At: now, Path: "r", Ms: 20 + added, Both: true})
}

func (f *fakeLink) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(f.step)
	for i, dev := range []string{"ifb4wan", "wan"} {
		if f.probes >= f.quiet { // the tick whose probe is the first loaded one
			f.bytes[i] += f.load[i] * float64(f.rates[i]) * 1000 / 8 * f.step.Seconds()
		}
		p := filepath.Join(f.root, "sys/class/net", dev, "statistics/tx_bytes")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("%d\n", int64(f.bytes[i]))), 0o644)
	}
	return f.now
}

// watched runs the daemon on f for its probes, with a check when given.
func watched(t *testing.T, f *fakeLink, every string, check func(context.Context) (history.Entry, error)) (*Daemon, Status) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	d := &Daemon{Root: f.root, Section: "wan", Source: f, Devices: [2]string{"ifb4wan", "wan"}, Rates: func() [2]int { return f.rates },
		Params: Params{Busy: 0.2, Quiet: 0.3, Idle: 0.05, Full: 0.85, BloatMs: 15, Window: time.Hour, MinMinutes: 5, Share: 0.5},
		Probe:  time.Millisecond, Now: f.clock, Every: every, Check: check}
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var st Status
	b, err := os.ReadFile(StatusPath(f.root, "wan"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("status: %v %s", err, b)
	}
	return d, st
}

// TestDaemonPassive: a download that adds 50 ms at 60 % of the shaper's
// rate becomes a finding, in LuCI's status and in the router's record,
// and in Prometheus' text; a shaper full with flat delay raises none.
func TestDaemonPassive(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	bloat := &fakeLink{root: t.TempDir(), now: t0, step: 20 * time.Second, load: [2]float64{0.6, 0.02}, added: 50, rates: [2]int{38000, 7600}, quiet: 6, end: 60}
	d, st := watched(t, bloat, "", nil)
	if len(st.Findings) != 1 || st.Findings[0].ID != "bloat-back-download" {
		t.Fatalf("findings %+v", st.Findings)
	}
	h, _ := history.Load(bloat.root)
	if q := h.Queues["wan"]; q == nil || len(q.Findings) != 1 {
		t.Errorf("the router's record: %+v", h.Queues)
	}
	var m strings.Builder
	d.WriteMetrics(&m)
	if !strings.Contains(m.String(), `sqmkit_watch_finding{section="wan",id="bloat-back-download"} 1`) || !strings.Contains(m.String(), `sqmkit_watch_added_delay_ms{section="wan",direction="download"} 50`) {
		t.Errorf("metrics:\n%s", m.String())
	}
	full := &fakeLink{root: t.TempDir(), now: t0, step: 20 * time.Second, load: [2]float64{0.97, 0.02}, added: 2, rates: [2]int{38000, 7600}, quiet: 6, end: 60}
	if _, st := watched(t, full, "", nil); len(st.Findings) != 0 || len(st.Minutes) < 10 {
		t.Errorf("a full shaper with flat delay: findings %+v, %d minutes", st.Findings, len(st.Minutes))
	}
	if _, err := os.Stat(history.Path(full.root)); err == nil {
		t.Error("nothing to say, yet the router's record was written")
	}
}

// TestDaemonScheduled: in the quiet hours, after ten quiet minutes, the
// check runs once; a line 50 % faster than tuned is a finding, and the
// check's grade joins the router's record with it, in one write.
func TestDaemonScheduled(t *testing.T) {
	night := time.Date(2026, 12, 2, 3, 0, 0, 0, time.Local)
	f := &fakeLink{root: t.TempDir(), now: night, step: 20 * time.Second, rates: [2]int{38000, 7600}, end: 3 * 20}
	history.Update(f.root, night, func(h *history.History) {
		h.Queue("wan").Tuned = &history.Tuned{At: night.Add(-30 * 24 * time.Hour), Down: 38000, Up: 7600, LineDown: 40000, LineUp: 8000}
	})
	checks := 0
	_, st := watched(t, f, "daily", func(context.Context) (history.Entry, error) {
		checks++
		return history.Entry{At: f.now, By: "watch", Grade: "A+", LineDown: 60000, LineUp: 8100}, nil
	})
	if checks != 1 || len(st.Findings) != 1 || st.Findings[0].ID != "line-faster-download" {
		t.Fatalf("%d checks, findings %+v", checks, st.Findings)
	}
	h, _ := history.Load(f.root)
	if e, ok := h.Queues["wan"].Last("watch"); !ok || e.LineDown != 60000 || len(h.Queues["wan"].Findings) != 1 {
		t.Errorf("the router's record: %+v", h.Queues["wan"])
	}
}

// TestDaemonKeptAtStart: after a reboot (/var/run empty) the findings the
// router kept are in LuCI's status before the first minute is judged.
func TestDaemonKeptAtStart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	f := &fakeLink{root: t.TempDir(), now: t0, step: time.Second, rates: [2]int{38000, 7600}, end: 2}
	history.Update(f.root, t0, func(h *history.History) {
		h.Queue("wan").Findings = []history.Finding{{ID: "line-faster-download", Since: t0.Add(-time.Hour)}}
	})
	_, st := watched(t, f, "", nil)
	if len(st.Minutes) != 0 || len(st.Findings) != 1 || st.Findings[0].ID != "line-faster-download" {
		t.Errorf("status before the first minute: %+v", st)
	}
}
