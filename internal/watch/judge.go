// Package watch keeps a shaper right after the day it was set. Passively,
// for free: from the shaper's own counters and a light delay probe it
// recognises, over hours, delay rising under load while the shaper is not
// full, which means the bottleneck moved past the router (the line got
// slower, the modem's queue grew) and the bloat is back (Judge). On
// request (option watch_test), at a quiet hour, a short test with a brief
// line measurement finds the line faster or slower than the rates were set
// for, or a grade lost (Checked). Each finding says its evidence and its
// fix, and goes to the router's record (package history), to LuCI and to
// Prometheus.
package watch

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sqmkit/sqmkit/internal/history"
)

// Minute is one minute of the watch: each direction's load as a share of
// its shaper's rate (download, upload), and the median delay the probes
// added over their baseline then (NaN: no sample).
type Minute struct {
	At      time.Time
	Load    [2]float64
	AddedMs float64
}

// Params are the judge's thresholds (DefaultParams).
type Params struct {
	// Busy: a direction at this share of its rate is loaded; the other
	// must be under Quiet for the minute's delay to be its (the probes'
	// round trips do not say which way they waited). Quiet leaves room for
	// a download's ACKs: on a 10:1 line they take ~20 % of the upload,
	// and a direction under a third of its rate queues nothing unless its
	// line fell under a third of its shaper.
	Busy, Quiet float64
	// Idle: both directions under it, the link is idle (the scheduled
	// check waits for idle minutes, not merely quiet ones).
	Idle float64
	// Full: at this share the shaper is full; a full shaper with flat
	// delay is a shaper at work, never a finding.
	Full float64
	// BloatMs: a minute whose median added delay passes it was bloated
	// (A+'s p95 bar: a working shaper holds its median far under it).
	BloatMs float64
	// Window is how far back the judge looks; MinMinutes loaded minutes of
	// a direction within it are the least evidence, and Share of them
	// bloated is a finding.
	Window     time.Duration
	MinMinutes int
	Share      float64
}

// DefaultParams judge over hours: six of them, and half an hour of a
// direction's load at least, so a day's downloads, not one, decide.
var DefaultParams = Params{Busy: 0.2, Quiet: 0.3, Idle: 0.05, Full: 0.85, BloatMs: 15, Window: 6 * time.Hour, MinMinutes: 30, Share: 0.5}

// Finding IDs.
const (
	BloatBack  = "bloat-back"  // delay under load past the router: passive
	LineFaster = "line-faster" // the scheduled check measured more line
	LineSlower = "line-slower"
	GradeDrop  = "grade-drop"
)

// Judge is the passive verdict of minutes at now: per direction, a
// finding when at least MinMinutes of the window's minutes had it loaded
// (the other quiet) and Share of those added more than BloatMs
// (TestJudge). since is when each finding was first made (kept across
// verdicts).
func Judge(p Params, minutes []Minute, now time.Time, since map[string]time.Time) []history.Finding {
	var out []history.Finding
	for d, dir := range []string{"download", "upload"} {
		var loaded, bloated []Minute
		for _, m := range minutes {
			if now.Sub(m.At) > p.Window || math.IsNaN(m.AddedMs) || m.Load[d] < p.Busy || m.Load[1-d] >= p.Quiet {
				continue
			}
			loaded = append(loaded, m)
			if m.AddedMs > p.BloatMs {
				bloated = append(bloated, m)
			}
		}
		if len(loaded) < p.MinMinutes || float64(len(bloated)) < p.Share*float64(len(loaded)) {
			continue
		}
		id := BloatBack + "-" + dir
		at := since[id]
		if at.IsZero() {
			at = now
		}
		added := make([]float64, len(bloated))
		full := 0
		for i, m := range bloated {
			added[i] = m.AddedMs
			if m.Load[d] >= p.Full {
				full++
			}
		}
		slices.Sort(added)
		where := "the shaper not full, so the queue was past the router"
		if full*2 > len(bloated) {
			where = "the shaper full, and its own queue is kept short, so the queue was past the router"
		}
		out = append(out, history.Finding{ID: id, Since: at, Severity: "warn", Subject: dir,
			Evidence: fmt.Sprintf("in %d of the %d minutes the %s was loaded over the last %v, the delay rose +%.0f ms (median), %s: the line got slower than the shaper's rate, or the modem's queue grew",
				len(bloated), len(loaded), dir, p.Window, added[len(added)/2], where),
			Fix: "run tune (LuCI: Network → SQM proof → Tune) to find the rates again; if the line's rate moves through the day, turn autorate on"})
	}
	return out
}
