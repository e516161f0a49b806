package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/autorate"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Daemon watches one shaped queue (`sqmkit watch SECTION`): every Probe
// it sends a delay probe and reads the shaper's byte counters; every
// minute it sums them up (Minute) and judges the window (Judge); in the
// quiet hours it runs the scheduled check when one is due.
type Daemon struct {
	Root, Section string
	Source        autorate.Source // the delay probe (reflectors, a sqmkit serve)
	// Devices are where the shaper's carried bytes are counted: the
	// download's IFB and the upload's WAN device.
	Devices [2]string
	Rates   func() [2]int // the shaper's rates now, kbit/s
	Params  Params
	Probe   time.Duration // between probes [DefaultProbe]
	// Every is the scheduled check's period ("daily", "weekly"; "" none),
	// Check runs it: the line measured and a short test (tune.Session.Check).
	Every string
	Check func(ctx context.Context) (history.Entry, error)
	// QuietHours bound the check's start (local hours; QuietHours), and
	// QuietFor is how long the link must have been idle first [10m].
	QuietHours [2]int
	QuietFor   time.Duration
	Log        func(string)
	Now        func() time.Time

	mu       sync.Mutex
	minutes  []Minute
	findings []history.Finding
	since    map[string]time.Time
	written  time.Time // the watch's last write of the router's record
	pending  bool      // findings changed since that write
	lastChk  time.Time
}

// DefaultProbe is one probe every 2 s: with the counters' read beside it, a
// few syscalls a second, under 1 % of a router's core (docs/results.md).
const DefaultProbe = 2 * time.Second

// StatusPath is the watch's live state for LuCI, in RAM.
func StatusPath(root, section string) string {
	return filepath.Join(root, "var/run/sqmkit/watch", section+".json")
}

// Status is what the watch shows: its findings, and its last minutes.
type Status struct {
	At       time.Time         `json:"at"`
	Findings []history.Finding `json:"findings"`
	Minutes  []Minute          `json:"minutes"`
	Every    string            `json:"every,omitempty"`
	LastChk  time.Time         `json:"last_check,omitempty"`
}

// MarshalJSON writes a minute's NaN delay (no sample) as null.
func (m Minute) MarshalJSON() ([]byte, error) {
	var added *float64
	if !math.IsNaN(m.AddedMs) {
		added = &m.AddedMs
	}
	return json.Marshal(struct {
		At      time.Time  `json:"at"`
		Load    [2]float64 `json:"load"`
		AddedMs *float64   `json:"added_ms"`
	}{m.At, m.Load, added})
}

// Run watches until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	d.defaults()
	// what the router learnt before a reboot stands until judged again
	if h, err := history.Load(d.Root); err == nil {
		if q := h.Queues[d.Section]; q != nil {
			d.findings = q.Findings
			for _, f := range q.Findings {
				d.since[f.ID] = f.Since
			}
			if e, ok := q.Last("watch"); ok {
				d.lastChk = e.At
			}
		}
	}
	d.status() // LuCI shows the kept findings at once, not a minute on
	sctx, stop := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- d.Source.Run(sctx) }()
	defer func() { stop(); <-srcDone }()
	tick := time.NewTicker(d.Probe)
	defer tick.Stop()
	var m minuteAcc
	var raws []autorate.Raw
	baselines := map[string]*autorate.Baseline{}
	var last [2]uint64
	var lastAt time.Time
	for {
		select {
		case <-ctx.Done():
			d.flush(true)
			return nil
		case err := <-srcDone:
			srcDone <- err
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("delay source %s stopped: %w", d.Source.Name(), err)
		case <-tick.C:
		}
		now := d.Now()
		rates := d.Rates()
		cur, ok := d.counters()
		// quiet: this tick's load under Quiet both ways, so the baseline
		// may follow a rise (a busy link's rise is its queue)
		quiet := true
		if ok && !lastAt.IsZero() {
			dt := now.Sub(lastAt).Seconds()
			for i := range 2 {
				if cur[i] >= last[i] && rates[i] > 0 && dt > 0 {
					at := float64(cur[i]-last[i]) * 8 / 1000 / float64(rates[i]) // kbit over kbit/s: the seconds at the rate
					m.load[i] += at
					quiet = quiet && at/dt < d.Params.Quiet
				}
			}
			m.seconds += dt
		}
		last, lastAt = cur, now
		raws = d.Source.Probe(now, raws[:0])
		for _, r := range raws {
			b := baselines[r.Path]
			if b == nil {
				b = &autorate.Baseline{}
				baselines[r.Path] = b
			}
			m.added = append(m.added, b.Add(r.At, r.Ms, quiet))
		}
		if m.start.IsZero() {
			m.start = now
		}
		if now.Sub(m.start) >= time.Minute {
			d.minute(m.done(now))
			m = minuteAcc{start: now}
			d.scheduled(ctx, now)
		}
	}
}

func (d *Daemon) defaults() {
	if d.Probe == 0 {
		d.Probe = DefaultProbe
	}
	if d.Params.Window == 0 {
		d.Params = DefaultParams
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.QuietHours == [2]int{} {
		d.QuietHours = QuietHours
	}
	if d.QuietFor == 0 {
		d.QuietFor = 10 * time.Minute
	}
	if d.Log == nil {
		d.Log = func(string) {}
	}
	d.since = map[string]time.Time{}
}

// minuteAcc adds up one minute.
type minuteAcc struct {
	start   time.Time
	load    [2]float64 // share of the rate × seconds
	seconds float64
	added   []float64
}

func (a minuteAcc) done(now time.Time) Minute {
	m := Minute{At: now, AddedMs: math.NaN()}
	if a.seconds > 0 {
		m.Load = [2]float64{a.load[0] / a.seconds, a.load[1] / a.seconds}
	}
	if len(a.added) > 0 {
		s := slices.Sorted(slices.Values(a.added))
		m.AddedMs = s[len(s)/2]
	}
	return m
}

// counters reads the bytes the shaper's devices sent (download, upload).
func (d *Daemon) counters() ([2]uint64, bool) {
	var n [2]uint64
	for i, dev := range d.Devices {
		b, err := os.ReadFile(filepath.Join(d.Root, "sys/class/net", dev, "statistics/tx_bytes"))
		if err != nil {
			return n, false
		}
		if n[i], err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return n, false
		}
	}
	return n, true
}

// minute takes one minute's figures and judges the window again.
func (d *Daemon) minute(m Minute) {
	d.mu.Lock()
	d.minutes = append(d.minutes, m)
	for len(d.minutes) > 0 && m.At.Sub(d.minutes[0].At) > d.Params.Window {
		d.minutes = d.minutes[1:]
	}
	passive := Judge(d.Params, d.minutes, m.At, d.since)
	// the scheduled check's findings stand until the next check
	var kept []history.Finding
	for _, f := range d.findings {
		if !strings.HasPrefix(f.ID, BloatBack) {
			kept = append(kept, f)
		}
	}
	next := append(kept, passive...)
	changed := ids(next) != ids(d.findings)
	d.findings = next
	for _, f := range next {
		d.since[f.ID] = f.Since
	}
	d.mu.Unlock()
	if changed {
		d.pending = true
		d.Log(fmt.Sprintf("findings now: %s", orNone(ids(next))))
		for _, f := range passive {
			d.Log(fmt.Sprintf("%s: %s; fix: %s", f.ID, f.Evidence, f.Fix))
		}
	}
	d.status()
	d.flush(false)
}

func ids(fs []history.Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.ID)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// flush writes changed findings to the router's record, at most once a
// history.Budget (force: at the end, still within it once a day).
func (d *Daemon) flush(force bool) {
	now := d.Now()
	if !d.pending || !force && !d.written.IsZero() && now.Sub(d.written) < history.Budget {
		return
	}
	d.mu.Lock()
	fs := slices.Clone(d.findings)
	d.mu.Unlock()
	if err := history.Update(d.Root, now, func(h *history.History) { h.Queue(d.Section).Findings = fs }); err != nil {
		d.Log("the router's record was not kept: " + err.Error())
		return
	}
	d.written, d.pending = now, false
}

// status writes the live state for LuCI (RAM, every minute).
func (d *Daemon) status() {
	d.mu.Lock()
	st := Status{At: d.Now().UTC(), Findings: slices.Clone(d.findings), Minutes: slices.Clone(d.minutes), Every: d.Every, LastChk: d.lastChk}
	d.mu.Unlock()
	if n := len(st.Minutes) - 360; n > 0 {
		st.Minutes = st.Minutes[n:]
	}
	if st.Findings == nil {
		st.Findings = []history.Finding{}
	}
	b, _ := json.Marshal(st)
	statefile.Write(StatusPath(d.Root, d.Section), b, 0o644)
}

// scheduled runs the check when it is due and the link has been quiet for
// QuietFor; its grade, line and findings go to the router's record in one
// write.
func (d *Daemon) scheduled(ctx context.Context, now time.Time) {
	if d.Check == nil || !due(d.Every, d.lastChk, now, d.QuietHours) || !d.quietFor(int(d.QuietFor/time.Minute)) {
		return
	}
	d.Log("the scheduled check runs")
	e, err := d.Check(ctx)
	if err != nil {
		d.Log("the scheduled check did not run: " + err.Error())
		return
	}
	d.lastChk = e.At
	h, _ := history.Load(d.Root)
	q := h.Queue(d.Section)
	found := Checked(q, e, d.Rates())
	d.mu.Lock()
	var next []history.Finding
	for _, f := range d.findings {
		if strings.HasPrefix(f.ID, BloatBack) {
			next = append(next, f)
		}
	}
	d.findings = append(next, found...)
	fs := slices.Clone(d.findings)
	d.mu.Unlock()
	q.Add(e)
	q.Findings = fs
	if err := h.Save(d.Root, d.Now()); err != nil {
		d.Log("the router's record was not kept: " + err.Error())
	}
	d.written, d.pending = d.Now(), false
	d.Log(fmt.Sprintf("the scheduled check: grade %s, line %d/%d kbit/s; findings now: %s", e.Grade, e.LineDown, e.LineUp, orNone(ids(fs))))
	d.status()
}

// quietFor says whether the last n minutes were idle both ways.
func (d *Daemon) quietFor(n int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.minutes) < n {
		return false
	}
	for _, m := range d.minutes[len(d.minutes)-n:] {
		if m.Load[0] >= d.Params.Idle || m.Load[1] >= d.Params.Idle {
			return false
		}
	}
	return true
}

// WriteMetrics renders the watch in Prometheus' text format: one series per
// finding (1 while it stands), each direction's loaded minutes and their
// median added delay over the window.
func (d *Daemon) WriteMetrics(w io.Writer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintln(&b, "# HELP sqmkit_watch_finding A finding of sqmkit's watch stands (1): its id names it.")
	fmt.Fprintln(&b, "# TYPE sqmkit_watch_finding gauge")
	for _, f := range d.findings {
		fmt.Fprintf(&b, "sqmkit_watch_finding{section=%s,id=%s} 1\n", autorate.Label(d.Section), autorate.Label(f.ID))
	}
	fmt.Fprintln(&b, "# HELP sqmkit_watch_loaded_minutes Minutes the direction was loaded (the other quiet) in the window.")
	fmt.Fprintln(&b, "# TYPE sqmkit_watch_loaded_minutes gauge")
	fmt.Fprintln(&b, "# HELP sqmkit_watch_added_delay_ms Median delay added over the baseline in those minutes.")
	fmt.Fprintln(&b, "# TYPE sqmkit_watch_added_delay_ms gauge")
	for i, dir := range []string{"download", "upload"} {
		var added []float64
		for _, m := range d.minutes {
			if !math.IsNaN(m.AddedMs) && m.Load[i] >= d.Params.Busy && m.Load[1-i] < d.Params.Quiet {
				added = append(added, m.AddedMs)
			}
		}
		fmt.Fprintf(&b, "sqmkit_watch_loaded_minutes{section=%s,direction=%s} %d\n", autorate.Label(d.Section), autorate.Label(dir), len(added))
		if len(added) > 0 {
			slices.Sort(added)
			fmt.Fprintf(&b, "sqmkit_watch_added_delay_ms{section=%s,direction=%s} %g\n", autorate.Label(d.Section), autorate.Label(dir), added[len(added)/2])
		}
	}
	io.WriteString(w, b.String())
}
