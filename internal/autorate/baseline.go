package autorate

import "time"

// Baseline is one delay path's delay without a queue: the probes to one
// reflector, or one direction's one-way delay to a server. A sample's
// added delay is its distance above the baseline.
//
// It falls at once to a lower sample (a queue can only add delay) and
// rises only slowly, and only while no direction is loaded: a rise under
// load is the queue itself, and a baseline that followed it would hide
// the bloat it is there to show (cake-autorate's users see rates creep
// up that way on links that stay busy). A real rise (a new route, a
// moved satellite, clock drift between two hosts' one-way stamps) is
// followed during the next quiet spell, at Rise per second of the gap.
type Baseline struct {
	ms   float64
	set  bool
	last time.Time
	// Rise is the share of the gap between a sample and the baseline that
	// the baseline closes per second of unloaded samples.
	Rise float64
}

// DefaultRise closes a gap in ~20 s of quiet samples: long against a burst
// of cross-traffic, short against a route change.
const DefaultRise = 0.05

// Add takes a sample (ms) and returns its added delay; quiet says no
// direction is loaded, so a rise may be followed.
func (b *Baseline) Add(at time.Time, ms float64, quiet bool) float64 {
	if b.Rise == 0 {
		b.Rise = DefaultRise
	}
	switch {
	case !b.set || ms < b.ms:
		b.ms, b.set = ms, true
	case quiet:
		dt := at.Sub(b.last).Seconds()
		b.ms += min(1, b.Rise*max(0, dt)) * (ms - b.ms)
	}
	b.last = at
	return ms - b.ms
}

// Ms is the baseline.
func (b *Baseline) Ms() float64 { return b.ms }
