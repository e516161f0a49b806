package search

import (
	"fmt"
)

// flatDelay: a miss at Bracket whose median is at least this share of the
// 95 % step's did not come down with the rate.
const flatDelay = 0.9

// frontier follows the bidirectional misses: the reference miss (ref:
// the first, or the latest to fall under flatDelay of the reference
// before it), the choices at its rates, and how far below those rates
// each direction has been measured since.
type frontier struct {
	d, u   Choice
	ref    Step
	phase  Phase
	downBy float64
	upBy   float64
}

// see takes the miss st (phase p, at the rates of d and u) and says
// whether the frontier is flat: since the reference miss, both rates have
// been measured lower, one of them by two BidirSteps, and no miss fell
// under flatDelay of it. A queue shrinks as the rate leaves it; a delay
// that stays put while either rate comes down is not the shaper's
// (TestBidirFlat).
func (f *frontier) see(st Step, p Phase, d, u *Choice) bool {
	if f.ref.Kind == "" || st.AddedMedian < flatDelay*f.ref.AddedMedian {
		*f = frontier{d: *d, u: *u, ref: st, phase: p}
		return false
	}
	f.downBy = max(f.downBy, 1-float64(st.RateKbit)/float64(f.ref.RateKbit))
	f.upBy = max(f.upBy, 1-float64(st.Other)/float64(f.ref.Other))
	return f.downBy > 0 && f.upBy > 0 && max(f.downBy, f.upBy) > 1.5*BidirStep
}

// flatBidir ends a bidirectional check on a flat frontier (frontier.see).
// Lowering further would give up goodput for a delay no rate moves, so
// the rates go back to the highest ones that read it, the reference's,
// and the bidirectional phase is judged against the next weaker grade,
// which that miss must meet, as a direction is when its own target is
// out of reach (settle). The one-way phases stay judged against the
// target asked for.
func (s *searcher) flatBidir(f frontier, d, u *Choice) error {
	t := s.target(Bidir)
	st := f.ref
	err := fmt.Errorf("bidirectional: %w (%s): +%.1f/+%.1f ms at %d/%d kbit/s did not fall with the download measured down to %.0f%% and the upload to %.0f%% of those rates: a delay that does not move with the rate is not a queue the shaper holds but a busy CPU (this router's, running the test itself), Wi-Fi or a slow link's own packet time",
		ErrNoRate, t.Name, st.AddedMedian, st.AddedP95, st.RateKbit, st.Other, 100*(1-f.downBy), 100*(1-f.upBy))
	w, ok := weaker[t.Name]
	if !ok || !meets(w, st.AddedMedian, st.AddedP95) {
		return err
	}
	*d, *u = f.d, f.u
	for _, c := range []*Choice{d, u} {
		c.also(RuleFlatFrontier, "; kept there beside the other direction's stream: the bidirectional delay did not fall as the rates came down further (+%.1f ms at these rates)", st.AddedMedian)
	}
	s.r.BidirTarget, s.r.BidirOutOfReach = w, err.Error()
	s.r.BidirMedian, s.r.BidirP95, s.r.BidirGoodputDn, s.r.BidirGoodputUp = st.AddedMedian, st.AddedP95, f.phase.DownKbit, f.phase.UpKbit
	s.say("%v; the bidirectional phase is judged against %s, at those rates", err, w.Name)
	return nil
}
