// Package autorate follows a link whose capacity moves (LTE/5G, Starlink,
// busy cable): it watches the delay the link adds and the load the shaper
// carries, and moves the shaper's rates between a floor and a ceiling so
// the queue stays in the shaper (docs/design.md, "Autorate").
//
// The controller here is pure: it gets delay samples and loads with their
// times and returns rate decisions. The daemon (run.go) feeds it from a
// prober and the interface counters and applies its decisions through
// apply.Follower.
package autorate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Sample is one delay measurement: the delay a probe saw above its
// baseline (Baseline does that), in one direction (OWD) or both (RTT).
type Sample struct {
	At      time.Time
	AddedMs float64
	Both    bool             // a round trip: which direction queued is not known
	Dir     config.Direction // for a one-way sample
}

// State is what a direction is doing.
type State string

const (
	Idle    State = "idle"
	Loaded  State = "loaded"
	Bloated State = "bloated"
	Stalled State = "stalled"
	Steady  State = "steady" // carrying traffic below HighLoad
)

// Change is one decision to move a rate: Reason for code and tests, Why
// (with the figures behind it) for the log.
type Change struct {
	Dir      config.Direction
	From, To int
	Reason   Reason
	Why      string
}

// Reason is the rule that moved a rate.
type Reason string

const (
	ByStall Reason = "stall" // no delay sample: back to the base rate
	ByBloat Reason = "bloat" // enough samples above BloatMs: cut below the capacity
	ByIdle  Reason = "idle"  // no load: back toward the base rate
	ByEase  Reason = "ease"  // delay above HoldMs under load: just under the capacity
	ByRaise Reason = "raise" // loaded without added delay: up
)

// Controller is the state of both directions.
type Controller struct {
	p    Params
	dirs [2]dirState
	last time.Time // of the latest sample
	t0   time.Time
}

type point struct {
	at time.Time
	ms float64
}

type dirState struct {
	rate      int
	state     State
	window    []point // the latest samples
	lastCut   time.Time
	lastMove  time.Time // of the latest raise or idle move
	lastEase  time.Time
	bloatRate int     // rate carried when bloat was last seen; 0 none
	easedMs   float64 // mean added delay at the last ease-off while it stays over the hold; 0 none
	probedMs  float64 // mean added delay at the last raise near the capacity; -1 none
	load      int
	loads     []int     // the last Carried Steps' loads
	heard     time.Time // the latest sample that crossed this direction
	floorAt   time.Time // when a cut last put the rate on the floor (zero: above it)
	shiftMs   float64   // the path's rise learnt under load (ShiftMs)
	loadedAt  time.Time // the latest Step that found it loaded
	flatMs    float64   // delay over the hold an ease-off did not move: no queue (easeOffQueue)
	up        float64   // the last raise's step; 0 after any other decision
}

// New starts a controller at the base rates.
func New(p Params, now time.Time) (*Controller, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	c := &Controller{p: p, last: now, t0: now}
	for d := range c.dirs {
		c.dirs[d] = dirState{rate: p.Base[d], state: Idle, probedMs: -1, heard: now}
	}
	return c, nil
}

// Rate is a direction's current rate.
func (c *Controller) Rate(d config.Direction) int { return c.dirs[d].rate }

// State is a direction's current state.
func (c *Controller) State(d config.Direction) State { return c.dirs[d].state }

// Add takes one delay sample.
func (c *Controller) Add(s Sample) {
	if s.At.After(c.last) {
		c.last = s.At
	}
	for d := range c.dirs {
		if !s.Both && config.Direction(d) != s.Dir {
			continue
		}
		ds := &c.dirs[d]
		if s.At.After(ds.heard) {
			ds.heard = s.At // the path answered, whichever way queued
		}
		ms := s.AddedMs - ds.shiftMs
		if ms < 0 { // the path's rise learnt is over: back toward the baseline
			ds.shiftMs, ms = max(0, s.AddedMs), 0
		}
		// A round trip's delay is blamed on the directions carrying
		// traffic: an idle direction's queue is empty, so the delay is not
		// its own (and an idle spike on an unloaded link cuts nothing).
		// Busy, not loaded: a download whose rate is far above the
		// capacity carries a small share of its rate, and is the one
		// queueing.
		if s.Both && !c.busy(config.Direction(d)) {
			continue
		}
		ds.window = append(ds.window, point{s.At, ms})
		if len(ds.window) > c.p.Window {
			ds.window = ds.window[1:]
		}
	}
}

// busy: more than the ACKs of the other direction's traffic (a few % of
// it) and more than an idle link's chatter.
func (c *Controller) busy(d config.Direction) bool {
	ds := &c.dirs[d]
	return ds.load >= c.p.IdleKbit && float64(ds.load) >= 0.05*float64(ds.rate)
}

func (c *Controller) loaded(d config.Direction) bool {
	ds := &c.dirs[d]
	return float64(ds.load) >= c.p.HighLoad*float64(ds.rate)
}

// Step runs the controller once with the directions' loads (kbit/s
// carried by the shaper since the last Step) and returns the changes.
func (c *Controller) Step(now time.Time, load [2]int) []Change {
	var out []Change
	stalled := now.Sub(c.last) >= c.p.Stall
	for d := range c.dirs {
		ds := &c.dirs[d]
		ds.load = load[d]
		if ds.loads = append(ds.loads, load[d]); len(ds.loads) > c.p.Carried {
			ds.loads = ds.loads[1:]
		}
		if c.loaded(config.Direction(d)) {
			ds.loadedAt = now
		}
		if ds.rate > c.p.Min[d] {
			ds.floorAt = time.Time{}
		} else if ds.floorAt.IsZero() {
			ds.floorAt = now
		}
		from := ds.rate
		reason, why := c.step(config.Direction(d), ds, now, stalled)
		if reason != "" && reason != ByRaise || ds.state != Loaded {
			ds.up = 0 // the raises in a row end
		}
		if ds.rate != from {
			out = append(out, Change{Dir: config.Direction(d), From: from, To: ds.rate, Reason: reason, Why: why})
		}
	}
	return out
}

// step is one direction's decision, one rule per case, each named for
// what it protects: a stalled delay signal holds the base (no evidence);
// bloat cuts (the delay); an idle link drifts back to the base (the next
// load's start); a loaded one eases off a building queue (the delay,
// before it is bloat) or raises (the throughput).
func (c *Controller) step(d config.Direction, ds *dirState, now time.Time, stalled bool) (Reason, string) {
	w := c.judge(d, ds, now)
	// a floor under the idle bar that its load fills is a loaded link
	// (TestLoadedUnderIdleKbit)
	idle := ds.load < c.p.IdleKbit && !c.loaded(d)
	switch {
	case stalled:
		return c.holdOnStall(d, ds)
	case c.silent(ds, now):
		return c.cutOnSilence(d, ds, now, w)
	case w.votes >= c.p.Votes:
		return c.cutOnBloat(d, ds, now, w)
	case idle && (!w.fresh || now.Sub(ds.loadedAt) < time.Duration(c.p.Carried)*c.p.Interval):
		// no load, and no answer or a load a moment ago: an outage as
		// likely as an idle link; an idle link drifts a second later
		ds.state = Idle
		return "", ""
	case idle:
		return c.driftToBase(d, ds, now)
	case c.loaded(d):
		return c.followLoad(d, ds, now, w)
	}
	ds.state = Steady
	return "", ""
}

// judged is what a direction's window says at a decision.
type judged struct {
	packetMs        float64 // one full packet's time at the rate
	bloatMs, holdMs float64 // the thresholds, a packet's time above the bars
	votes           int     // samples above bloatMs
	mean, spread    float64 // the window's mean, and twice its standard error
	least           float64 // the window's least: what a queue adds to every sample
	fresh           bool    // a sample since about the last step
	probedMs        float64 // the delay at a raise near the capacity (-1 none)
}

func (c *Controller) judge(d config.Direction, ds *dirState, now time.Time) judged {
	p := c.p
	w := judged{packetMs: float64(p.PacketBits[d]) / float64(ds.rate)} // bits / (kbit/s) = ms
	w.bloatMs, w.holdMs = p.BloatMs+w.packetMs+ds.flatMs, p.HoldMs+w.packetMs+ds.flatMs
	sum := 0.0
	for i, v := range ds.window {
		if v.ms > w.bloatMs {
			w.votes++
		}
		sum += v.ms
		if i == 0 || v.ms < w.least {
			w.least = v.ms
		}
	}
	if n := float64(len(ds.window)); n > 0 {
		w.mean = sum / n
		for _, v := range ds.window {
			w.spread += (v.ms - w.mean) * (v.ms - w.mean)
		}
		w.spread = 2 * math.Sqrt(w.spread/n/n)
	}
	w.fresh = now.Sub(ds.heard) < 3*p.Interval
	// a raise near the capacity is judged at the next decision while
	// loaded; any other state forgets it
	w.probedMs, ds.probedMs = ds.probedMs, -1
	return w
}

func (c *Controller) clamp(d config.Direction, v float64) int {
	return max(c.p.Min[d], min(c.p.Max[d], int(math.Round(v))))
}

// holdOnStall: no delay sample for Stall is no evidence of anything (a
// stall, the WAN down, reflectors gone): back to the base rate and hold
// there.
func (c *Controller) holdOnStall(d config.Direction, ds *dirState) (Reason, string) {
	ds.state = Stalled
	ds.window, ds.flatMs = ds.window[:0], 0
	if ds.rate == c.p.Base[d] {
		return "", ""
	}
	ds.rate = c.p.Base[d]
	return ByStall, fmt.Sprintf("no delay sample for %v: a stall or the WAN down; back to the base rate and holding", c.p.Stall)
}

// silent: a direction loaded when its path last answered has had no
// sample since for Silence (its own: one-way samples of the other
// direction say nothing of it; a download's load falls with its link).
func (c *Controller) silent(ds *dirState, now time.Time) bool {
	return c.p.Silence > 0 && now.Sub(ds.heard) >= c.p.Silence && !ds.loadedAt.Before(ds.heard.Add(-c.p.Interval))
}

// cutOnSilence protects the delay through an outage: the probes not
// answered wait in a queue at least as long as the silence, which is
// bloat; nothing says what the link carries, so no capacity is learnt.
func (c *Controller) cutOnSilence(d config.Direction, ds *dirState, now time.Time, w judged) (Reason, string) {
	silence := now.Sub(ds.heard)
	w.mean = float64(silence.Milliseconds()) + w.packetMs
	reason, _ := c.cutOnBloat(d, ds, now, w)
	ds.bloatRate = 0
	if reason == "" {
		return "", ""
	}
	return ByBloat, fmt.Sprintf("no delay sample for %v while loaded: every probe since waits in a queue (an outage); cut", silence.Round(time.Millisecond))
}

// cutOnBloat protects the delay: Votes samples above the bloat threshold
// cut the rate under what the link carries, deep enough to drain the
// queue in Drain, once a Refractory; not again while the queue a cut
// left drains (the delay falling since), which only starves the link
// (TestRecordedOutage).
func (c *Controller) cutOnBloat(d config.Direction, ds *dirState, now time.Time, w judged) (Reason, string) {
	p := c.p
	ds.state = Bloated
	if now.Sub(ds.lastCut) < p.Refractory || now.Sub(ds.lastCut) < 2*p.Drain && draining(ds.window, w.spread) || c.pathMoved(d, ds, now, w) {
		return "", ""
	}
	carried := c.capacity(d, ds)
	cut := p.drainShare(w.mean-w.packetMs, p.DownMin, p.DownMax)
	if ds.rate == p.Min[d] && carried*(1-cut) <= float64(p.Min[d]) {
		// on the floor already: no cut to make, and no settle to wait out
		// (a delay that jitters past the bar kept a floored rate there:
		// TestRecordedBursts)
		return "", ""
	}
	ds.bloatRate = int(carried)
	if carried*(1-cut) < float64(p.Min[d]) {
		// under the floor the owner set is an outage, not a capacity to
		// approach carefully when the link is back (TestRecordedOutage)
		ds.bloatRate = 0
	}
	ds.rate = c.clamp(d, carried*(1-cut))
	ds.lastCut = now
	ds.lastEase = time.Time{} // Settle, not Cruise, times the rise after a cut
	ds.easedMs = 0
	ds.window = ds.window[:0] // the next decision on fresh samples
	return ByBloat, fmt.Sprintf("bloat: %d of the last %d samples above +%.1f ms (mean +%.1f ms), capacity about %d kbit/s; cut %.0f%% below it",
		w.votes, p.Window, w.bloatMs, w.mean, int(carried), 100*cut)
}

// drained: a full window since the last cut (a cut empties it), every
// sample under the hold: the queue is gone, and the rate may rise before
// Settle (TestRecordedOutage).
func (c *Controller) drained(ds *dirState, w judged) bool {
	if len(ds.window) < c.p.Window {
		return false
	}
	for _, v := range ds.window {
		if v.ms > w.holdMs {
			return false
		}
	}
	return true
}

// pathMoved learns a rise of the path's own delay (ShiftMs): on the
// floor for Settle, every sample of a full window over the bloat bar, and
// flat (a queue the floor cannot drain grows); the window's least is
// the path's, and later samples are judged above it.
func (c *Controller) pathMoved(d config.Direction, ds *dirState, now time.Time, w judged) bool {
	p := c.p
	if p.ShiftMs <= 0 || ds.floorAt.IsZero() || now.Sub(ds.floorAt) < p.Settle || len(ds.window) < p.Window {
		return false
	}
	least := ds.window[0].ms
	for _, v := range ds.window {
		least = min(least, v.ms)
	}
	first, last := ds.window[0].ms, ds.window[len(ds.window)-1].ms
	if least <= w.bloatMs || least > p.ShiftMs || last > first+w.spread+p.GrowMs {
		return false
	}
	ds.shiftMs += least
	for i := range ds.window {
		ds.window[i].ms -= least
	}
	ds.floorAt = now
	return true
}

// draining: the window's delay fell by more than its noise.
func draining(win []point, spread float64) bool {
	return len(win) >= 2 && win[len(win)-1].ms < win[0].ms-spread
}

// driftToBase protects the next load's start: an idle link's rate moves
// back toward the base, a step of IdleDecay each Move.
func (c *Controller) driftToBase(d config.Direction, ds *dirState, now time.Time) (Reason, string) {
	p := c.p
	ds.state = Idle
	ds.flatMs = 0 // the next load's delay is judged afresh
	if ds.rate == p.Base[d] || now.Sub(ds.lastMove) < p.Move {
		return "", ""
	}
	ds.lastMove = now
	step := p.IdleDecay * float64(p.Base[d])
	if ds.rate > p.Base[d] {
		ds.rate = max(p.Base[d], c.clamp(d, float64(ds.rate)-step))
	} else {
		ds.rate = min(p.Base[d], c.clamp(d, float64(ds.rate)+step))
	}
	return ByIdle, "idle: back toward the base rate"
}

// followLoad is a loaded direction's move, a Move apart: ease off a queue
// that builds, else raise.
func (c *Controller) followLoad(d config.Direction, ds *dirState, now time.Time, w judged) (Reason, string) {
	p := c.p
	ds.state = Loaded
	// no sample in the window is no evidence: nothing moves on it, as
	// at a start whose delay source has not answered (TestNoSamplesNoRaise)
	if !w.fresh || len(ds.window) == 0 || now.Sub(ds.lastCut) < p.Settle && !c.drained(ds, w) {
		ds.probedMs = w.probedMs // not judged yet
		return "", ""
	}
	// A raise near the capacity that put the rate over it grows the
	// queue by a few ms a Move (a download's TCP fills the modem at
	// its own pace once the shaper stops dropping), under the hold
	// for a Move or two; a raise on top doubled the growth, and the
	// excursion's peak was every probe's p95. So the delay's rise
	// since that raise, beyond the window's own noise, eases at once,
	// not a Move later (TestProbeNearCapacity).
	overProbe := w.probedMs >= 0 && w.mean > w.probedMs+p.GrowMs+w.spread
	if !overProbe && now.Sub(ds.lastMove) < p.Move {
		ds.probedMs = w.probedMs
		return "", ""
	}
	// a queue delays every probe, a link's burst some: the hold asks the
	// window's least, the mean eased on every burst (TestRecordedBursts)
	if w.least > w.holdMs || overProbe {
		return c.easeOffQueue(d, ds, now, w, overProbe)
	}
	return c.raise(d, ds, now, w)
}

// easeOffQueue protects the delay before it is bloat: a queue is building,
// the link carries less than the rate; ease to just under what it
// carries, so the queue drains and the rate cruises there instead of
// riding up to the bloat threshold and being cut deeper. Eased already
// and the delay did not grow: under the capacity a queue drains, over it
// it grows, so this is no queue the rate holds; hold, and probe a quarter
// step once a Cruise (past the capacity the delay grows, and that eases).
func (c *Controller) easeOffQueue(d config.Direction, ds *dirState, now time.Time, w judged, overProbe bool) (Reason, string) {
	p := c.p
	if !overProbe && ds.easedMs > 0 && w.mean < ds.easedMs+p.GrowMs+w.spread {
		if now.Sub(ds.lastEase) < p.Cruise {
			return "", "" // a queue an ease-off drains takes seconds to show it
		}
		// no queue of this link's (a busy CPU, a link that delivers in
		// bursts): the delay is judged above this level from now on, up to
		// the bloat bar, and the rate follows the load up again
		ds.flatMs = min(p.BloatMs-p.HoldMs, ds.flatMs+w.mean-w.holdMs)
		ds.easedMs = 0
		return "", ""
	}
	carried := c.capacity(d, ds)
	// under what it carries by enough to drain the newest sample's queue
	// in Drain, a quarter step to DownMin
	newest := ds.window[len(ds.window)-1].ms - w.packetMs
	next := c.clamp(d, math.Min(float64(ds.rate), carried)*(1-p.drainShare(newest, p.Up/4, p.DownMin)))
	if next == ds.rate {
		// on the floor: no ease-off to make, and no capacity learnt from
		// one; the delay's level is kept, so a flat one is found flat
		// (TestRecordedBursts)
		if ds.easedMs == 0 {
			ds.easedMs, ds.lastEase = w.mean, now
		}
		return "", ""
	}
	ds.lastMove, ds.lastEase, ds.easedMs = now, now, w.mean
	ds.bloatRate = int(carried)
	ds.rate = next
	if overProbe {
		return ByEase, fmt.Sprintf("added delay rose from +%.1f to +%.1f ms since the raise near the capacity, about %d kbit/s: over it; ease off under it", w.probedMs, w.mean, int(carried))
	}
	return ByEase, fmt.Sprintf("added delay +%.1f ms above the +%.1f ms hold, capacity about %d kbit/s: ease off under it", w.mean, w.holdMs, int(carried))
}

// raise protects the throughput: loaded with no added delay, the rate
// goes up a step; near the capacity the link showed last time carefully
// (a cruise there first, then half or a quarter step).
func (c *Controller) raise(d config.Direction, ds *dirState, now time.Time, w judged) (Reason, string) {
	p := c.p
	ds.easedMs = 0
	up, near := p.Up, false
	switch r := float64(ds.rate); {
	case ds.bloatRate > 0 && r > (1+p.Near)*float64(ds.bloatRate):
		ds.bloatRate = 0 // past it without bloat: the capacity moved up
	case ds.bloatRate > 0 && r >= (1-p.Near)*float64(ds.bloatRate):
		switch {
		case now.Sub(ds.lastEase) < p.Cruise:
			return "", "" // cruise at the eased rate before probing again
		case ds.lastMove.Equal(ds.lastEase):
			// the probe after a cruise: from 2 % under the capacity,
			// a quarter step would land on it and learn nothing
			up /= 2
		default:
			up /= 4 // near the capacity the link showed last time: carefully
		}
		ds.probedMs, near = w.mean, true
	}
	// raises in a row double: a link that keeps saying yes has more
	// (TestRecordedJump); near the capacity only while the last raise
	// there added nothing at all, as a raise past it adds a little first
	// (TestProbeNearCapacity)
	if !near || w.probedMs >= 0 && w.mean <= w.probedMs {
		up = min(p.UpMax, max(up, 2*ds.up))
	}
	ds.lastMove, ds.up = now, up
	ds.rate = c.clamp(d, float64(ds.rate)*(1+up))
	return ByRaise, "loaded and no added delay: raise"
}

// drainShare is the share of the rate to give up so that a queue of ms
// drains in Drain, within lo and hi: a cut's and an ease-off's depth.
func (p Params) drainShare(ms, lo, hi float64) float64 {
	return math.Min(hi, math.Max(lo, ms/float64(p.Drain.Milliseconds())))
}

// capacity is what the link carries in direction d now, from the load and
// the delay's rise. The download's shaper sits behind the bottleneck: what
// it carries is what the bottleneck let through, the capacity itself. The
// upload's sits in front of it: while the modem's queue grows, the shaper
// sends more than the link carries, by the delay's slope — a queue of q
// bits at capacity C holds q/C seconds, and d(q/C)/dt = load/C − 1, so
// C = load / (1 + slope).
func (c *Controller) capacity(d config.Direction, ds *dirState) float64 {
	load := math.Min(float64(ds.load), float64(ds.rate))
	if d == config.Download {
		// what the link delivered: over Carried Steps, not a dip's
		load = math.Min(upperLoad(ds.loads), float64(ds.rate))
	}
	if load < float64(c.p.Min[d]) {
		load = float64(ds.rate) // no load measured yet: the rate is all there is
	}
	if d == config.Download || len(ds.window) < 2 {
		return load
	}
	first, last := ds.window[0], ds.window[len(ds.window)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return load
	}
	slope := (last.ms - first.ms) / 1000 / dt
	return load / (1 + math.Max(0, slope))
}

// upperLoad is the loads' third quartile (0 for none): a dip's loads
// fall under it, one burst of a queue's drain rises over it.
func upperLoad(v []int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return float64(s[len(s)*3/4])
}
