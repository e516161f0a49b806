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
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Params are a controller's settings. Defaults are in DefaultParams; each
// has its reason there.
type Params struct {
	Min, Base, Max [2]int // kbit/s per config.Direction

	// BloatMs is the added delay (over the baseline) that counts as bloat;
	// HoldMs the added delay above which the rate is not raised.
	BloatMs, HoldMs float64
	// PacketBits is the largest packet on the link, per direction
	// (plan.MaxPacketBits): a probe behind one waits its time at the rate,
	// which is no queue, so both thresholds add it. At 3 Mbit/s that is
	// 4 ms, most of HoldMs: without it a loaded slow link eases to its
	// floor (TestPacketTimeIsNoQueue).
	PacketBits [2]int
	// Window and Votes: bloat is declared when Votes of the last Window
	// samples of a direction are above BloatMs.
	Window, Votes int
	// HighLoad is the share of the shaper rate carried that makes a
	// direction "loaded": only then is its rate raised, and (for a
	// round-trip signal) only then is added delay blamed on it.
	HighLoad float64
	// Idle is the load (kbit/s) below which a direction is idle.
	IdleKbit int
	// Up is the raise per Move while loaded and not delayed, as a share
	// of the rate; Near slows it to a quarter within Near of the rate where
	// bloat was last seen (the capacity the link showed then).
	Up, Near float64
	// GrowMs is how much the mean added delay must rise to be a queue
	// that grows: after an ease-off for another, after a raise near the
	// capacity (beyond the window's noise) for an ease-off. A rate 2 %
	// over the capacity (a quarter step past it) grows the queue ~8 ms per
	// Move, while a delay that is no queue of the bottleneck's (a busy
	// CPU, a queue elsewhere) stays flat, and easing on it slid the lab's
	// rates to their floor (TestFlatDelayIsNoQueue).
	GrowMs float64
	// Cruise is how long a direction holds the rate an ease-off chose
	// before it probes upward again near that capacity. The queue has no
	// resting point between empty (rate under capacity) and growing (over
	// it), so a controller that probes every Move dithers around the
	// capacity with a change every other Move; holding, as BBR cruises
	// between its bandwidth probes, keeps the eased rate that carried the
	// link without queueing and costs a few percent of rate for seconds.
	Cruise time.Duration
	// Move is the least time between two raises or idle moves: a raise
	// needs a round trip and TCP's response to show in the delay, and a
	// change every tick would be a log line every tick.
	Move time.Duration
	// DownMin and DownMax bound the cut on bloat, as a share of the
	// capacity the link showed; within them the cut is the share that
	// drains the delay seen in Drain. An ease-off drains the newest
	// sample's delay in Drain too, from a quarter step up to DownMin.
	DownMin, DownMax float64
	Drain            time.Duration
	// Refractory is the least time between two cuts (a cut needs a round
	// trip and the queue's drain to show in the delay); Settle the time
	// after a cut before the rate may rise again.
	Refractory, Settle time.Duration
	// IdleDecay moves an idle direction's rate toward Base per Move.
	IdleDecay float64
	// Stall: no delay sample for this long is a stall (dropout, WAN down,
	// every reflector gone); the rates fall to at most Base and hold.
	Stall time.Duration
	// Interval is how often Step runs.
	Interval time.Duration
}

// DefaultParams are the defaults for a link whose rates lie between floor
// and ceiling, base being a rate it sustains most of the time.
func DefaultParams(floor, base, ceiling [2]int) Params {
	return Params{
		Min: floor, Base: base, Max: ceiling,
		// A+ is +5 ms median; a shaper at the right rate keeps the added
		// delay under ~2 ms, so 5 ms sustained means the bottleneck moved
		// into the modem. 15 ms is bloat by any grade (A+'s p95 bar).
		BloatMs: 15, HoldMs: 5,
		// 3 of 6 samples (300 ms at 20 Hz): one late probe is jitter, three
		// are a queue.
		Window: 6, Votes: 3,
		// 75 %: TCP in congestion avoidance fills a shaper to ~90–100 %; a
		// flow that carries less is limited elsewhere (application, Wi-Fi).
		HighLoad: 0.75, IdleKbit: 200,
		// 8 % per 400 ms: from a third of a rate to all of it in ~6 s
		// (LTE's capacity moves that fast); one raise past the capacity
		// queues 8 % of it for the ~300 ms bloat detection takes, ~25 ms.
		Up: 0.08, Near: 0.1, Move: 400 * time.Millisecond, GrowMs: 1,
		// 3 s: on a steady loaded line an ease-off and two raises per
		// ~4 s instead of a change every Move; the eased rate is 2 %
		// under the capacity, so cruising wastes about that, and a
		// capacity that rose is found one cruise later.
		Cruise: 3 * time.Second,
		// cut to 60–95 % of the capacity the link showed: 5 % drains a
		// few ms at once, 40 % half a second of queue in about as long;
		// deeper would starve the link for longer than the queue lasts.
		DownMin: 0.05, DownMax: 0.40, Drain: 500 * time.Millisecond,
		Refractory: 300 * time.Millisecond, Settle: 2 * time.Second,
		IdleDecay: 0.1, Stall: 2 * time.Second,
		Interval: 100 * time.Millisecond,
	}
}

// Check says which setting is wrong, and how to fix it.
func (p Params) Check() error {
	for _, d := range config.Directions {
		if p.Min[d] <= 0 || p.Min[d] > p.Base[d] || p.Base[d] > p.Max[d] {
			return fmt.Errorf("%s rates: min %d, base %d, max %d kbit/s: want 0 < min <= base <= max", d, p.Min[d], p.Base[d], p.Max[d])
		}
	}
	if p.Votes < 1 || p.Votes > p.Window || p.HoldMs <= 0 || p.HoldMs > p.BloatMs || p.Interval <= 0 || p.Move < p.Interval || p.Cruise < 0 {
		return fmt.Errorf("controller settings out of range: window %d votes %d hold %g ms bloat %g ms interval %v move %v cruise %v", p.Window, p.Votes, p.HoldMs, p.BloatMs, p.Interval, p.Move, p.Cruise)
	}
	return nil
}

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
}

// New starts a controller at the base rates.
func New(p Params, now time.Time) (*Controller, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	c := &Controller{p: p, last: now, t0: now}
	for d := range c.dirs {
		c.dirs[d] = dirState{rate: p.Base[d], state: Idle, probedMs: -1}
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
		// A round trip's delay is blamed on the directions carrying
		// traffic: an idle direction's queue is empty, so the delay is not
		// its own (and an idle spike on an unloaded link cuts nothing).
		// Busy, not loaded: a download whose rate is far above the
		// capacity carries a small share of its rate, and is the one
		// queueing.
		if s.Both && !c.busy(config.Direction(d)) {
			continue
		}
		ds.window = append(ds.window, point{s.At, s.AddedMs})
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
		from := ds.rate
		reason, why := c.step(config.Direction(d), ds, now, stalled)
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
	switch {
	case stalled:
		return c.holdOnStall(d, ds)
	case w.votes >= c.p.Votes:
		return c.cutOnBloat(d, ds, now, w)
	case ds.load < c.p.IdleKbit:
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
	fresh           bool    // a sample since about the last step
	probedMs        float64 // the delay at a raise near the capacity (-1 none)
}

func (c *Controller) judge(d config.Direction, ds *dirState, now time.Time) judged {
	p := c.p
	w := judged{packetMs: float64(p.PacketBits[d]) / float64(ds.rate)} // bits / (kbit/s) = ms
	w.bloatMs, w.holdMs = p.BloatMs+w.packetMs, p.HoldMs+w.packetMs
	sum := 0.0
	for _, v := range ds.window {
		if v.ms > w.bloatMs {
			w.votes++
		}
		sum += v.ms
	}
	if n := float64(len(ds.window)); n > 0 {
		w.mean = sum / n
		for _, v := range ds.window {
			w.spread += (v.ms - w.mean) * (v.ms - w.mean)
		}
		w.spread = 2 * math.Sqrt(w.spread/n/n)
	}
	w.fresh = now.Sub(c.last) < 3*p.Interval
	// a raise near the capacity is judged at the next decision while
	// loaded; any other state forgets it
	w.probedMs, ds.probedMs = ds.probedMs, -1
	return w
}

func (c *Controller) clamp(d config.Direction, v float64) int {
	return max(c.p.Min[d], min(c.p.Max[d], int(math.Round(v))))
}

// holdOnStall: no delay sample for Stall is no evidence of anything (a
// stall, the WAN down): back to the base rate and hold there.
func (c *Controller) holdOnStall(d config.Direction, ds *dirState) (Reason, string) {
	ds.state = Stalled
	ds.window = ds.window[:0]
	if ds.rate <= c.p.Base[d] {
		return "", ""
	}
	ds.rate = c.p.Base[d]
	return ByStall, fmt.Sprintf("no delay sample for %v: a stall or the WAN down; back to the base rate and holding", c.p.Stall)
}

// cutOnBloat protects the delay: Votes samples above the bloat threshold
// cut the rate under what the link carries, deep enough to drain the
// queue in Drain, once a Refractory.
func (c *Controller) cutOnBloat(d config.Direction, ds *dirState, now time.Time, w judged) (Reason, string) {
	p := c.p
	ds.state = Bloated
	if now.Sub(ds.lastCut) < p.Refractory {
		return "", ""
	}
	carried := c.capacity(d, ds)
	cut := p.drainShare(w.mean-w.packetMs, p.DownMin, p.DownMax)
	ds.bloatRate = int(carried)
	ds.rate = c.clamp(d, carried*(1-cut))
	ds.lastCut = now
	ds.lastEase = time.Time{} // Settle, not Cruise, times the rise after a cut
	ds.easedMs = 0
	ds.window = ds.window[:0] // the next decision on fresh samples
	return ByBloat, fmt.Sprintf("bloat: %d of the last %d samples above +%.1f ms (mean +%.1f ms), capacity about %d kbit/s; cut %.0f%% below it",
		w.votes, p.Window, w.bloatMs, w.mean, int(carried), 100*cut)
}

// driftToBase protects the next load's start: an idle link's rate moves
// back toward the base, a step of IdleDecay each Move.
func (c *Controller) driftToBase(d config.Direction, ds *dirState, now time.Time) (Reason, string) {
	p := c.p
	ds.state = Idle
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
	if !w.fresh || len(ds.window) == 0 || now.Sub(ds.lastCut) < p.Settle {
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
	if w.mean > w.holdMs || overProbe {
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
	if !overProbe && ds.easedMs > 0 && w.mean < ds.easedMs+p.GrowMs {
		if now.Sub(ds.lastMove) < p.Cruise {
			return "", ""
		}
		ds.lastMove = now
		ds.rate = c.clamp(d, float64(ds.rate)*(1+p.Up/4))
		return ByRaise, fmt.Sprintf("added delay +%.1f ms over the +%.1f ms hold but not growing since the last ease-off: no queue of this link's; probe up", w.mean, w.holdMs)
	}
	carried := c.capacity(d, ds)
	ds.lastMove, ds.lastEase, ds.easedMs = now, now, w.mean
	ds.bloatRate = int(carried)
	// under what it carries by enough to drain the newest sample's queue
	// in Drain, a quarter step to DownMin
	newest := ds.window[len(ds.window)-1].ms - w.packetMs
	ds.rate = c.clamp(d, math.Min(float64(ds.rate), carried)*(1-p.drainShare(newest, p.Up/4, p.DownMin)))
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
	up := p.Up
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
		ds.probedMs = w.mean
	}
	ds.lastMove = now
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
