package autorate

import (
	"fmt"
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
	// every reflector gone); the rates go to Base and hold: a Silence's
	// cuts end there, so reflectors that stop answering on a working link
	// do not starve it.
	Stall time.Duration
	// Silence: no sample for this long while a direction is loaded is a
	// delay at least that long: every probe since waits in a queue (a
	// cellular outage), and the rate is cut as for bloat, so the modem's
	// buffer does not fill at the full rate before the link returns
	// (TestRecordedOutage).
	Silence time.Duration
	// Interval is how often Step runs.
	Interval time.Duration
	// Carried is how many Steps' loads say what the download's link
	// carries (upperLoad): a cellular link's capacity dips for a slot or
	// two, and the bloat it leaves is seen ~300 ms later, so the last
	// Step's load is the dip's, not the link's (TestRecordedDips).
	Carried int
	// ShiftMs is the largest rise of the path's own delay the controller
	// learns under load (a handover, a new route: tens of ms; a full
	// modem buffer holds hundreds): a delay that a rate at the floor held
	// for Settle did not drain, flat, is the path's (TestRecordedHandover).
	ShiftMs float64
	// UpMax is the most a raise may grow to: each raise in a row without
	// added delay doubles the last, from Up to UpMax, so a capacity that
	// jumped tenfold is found in seconds (TestRecordedJump); any other
	// decision starts again from Up.
	UpMax float64
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
		// 300 ms: six probes at 20 Hz unanswered, as long as bloat takes
		// to be declared on answered ones
		Silence:  300 * time.Millisecond,
		Interval: 100 * time.Millisecond,
		// a second of loads: longer than a dip, shorter than a handover
		Carried: 10, ShiftMs: 100,
		// 24 %: from a tenth of a rate to all of it in ~12 raises, 5 s; a
		// raise that lands past the capacity queues under a quarter of it
		// for the ~300 ms bloat takes to show (a third failed
		// TestFollowsCapacity's step up on the upload)
		UpMax: 0.24,
	}
}

// Check says which setting is wrong, and how to fix it.
func (p Params) Check() error {
	for _, d := range config.Directions {
		if p.Min[d] <= 0 || p.Min[d] > p.Base[d] || p.Base[d] > p.Max[d] {
			return fmt.Errorf("%s rates: min %d, base %d, max %d kbit/s: want 0 < min <= base <= max", d, p.Min[d], p.Base[d], p.Max[d])
		}
		// a floor the shaper refuses would fail every change down to it,
		// each followed by a read of the tree (TestParamsCheck)
		if p.Min[d] < config.MinRateKbit {
			return fmt.Errorf("%s min %d kbit/s is below the %d kbit/s a shaper runs at: raise the floor to %d or more", d, p.Min[d], config.MinRateKbit, config.MinRateKbit)
		}
	}
	if p.Votes < 1 || p.Votes > p.Window || p.HoldMs <= 0 || p.HoldMs > p.BloatMs || p.Interval <= 0 || p.Move < p.Interval || p.Cruise < 0 || p.Carried < 1 || p.UpMax < p.Up {
		return fmt.Errorf("controller settings out of range: window %d votes %d hold %g ms bloat %g ms interval %v move %v cruise %v carried %d up %g max %g",
			p.Window, p.Votes, p.HoldMs, p.BloatMs, p.Interval, p.Move, p.Cruise, p.Carried, p.Up, p.UpMax)
	}
	return nil
}
