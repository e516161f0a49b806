package search

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
)

// A line that moves (a cellular link, a busy cell) has no one rate: set
// where it is now, the shaper is above it half the time and bloats, or
// below it and wastes it. A search's measurements of one direction are
// repeated looks at the link: the line's seconds, and every one-way step,
// whose goodput under the line is its rate's share of the line's. Past a
// steady line's noise they disagree (TestMovingLine):
//
//   - the line's seconds, but the highest and the lowest, spread more
//     than twofold (a steady line's stay within a tenth); a stall and its
//     catch-up count as the two seconds' mean (withoutStalls: cable in the
//     lab had three in 30 s); not on a slow line, whose seconds alternate
//     with its ACKs' clumps (TestLineSeries);
//   - a step at 90 % of the line or less carried under 70 % of what that
//     rate carries: the link fell under the shaper. (A rise shows only in
//     the line's seconds: a step's goodput is its rate's at most.)
const (
	moveSpread = 2.0
	moveFell   = 0.7
)

// Moving is a search's verdict that a direction's line moved: tune then
// writes nothing and says autorate's bounds instead, by the lab's rule for
// recorded links (the 10th and 90th percentile of the seconds seen).
type Moving struct {
	Kind                Kind
	Why                 string
	FloorKbit, CeilKbit int // shaper rates
}

// MovingError says which directions moved and the bounds to follow them.
type MovingError struct{ Dirs []Moving }

func (e *MovingError) Error() string {
	var b strings.Builder
	var lo, hi [2]int
	for _, m := range e.Dirs {
		fmt.Fprintf(&b, "the %s line moves: %s. ", m.Kind, m.Why)
		i := 0
		if m.Kind == Upload {
			i = 1
		}
		lo[i], hi[i] = m.FloorKbit, m.CeilKbit
	}
	b.WriteString("One rate would be wrong much of the time, so nothing was written: let autorate follow the line (LuCI: Network → SQM proof → Autorate; or option autorate '1'")
	for i, k := range []Kind{Download, Upload} {
		if lo[i] > 0 {
			fmt.Fprintf(&b, ", autorate_min_%s '%d', autorate_max_%s '%d'", k, lo[i], k, hi[i])
		}
	}
	b.WriteString("), floor and ceiling at the 10th and 90th percentile of what the link carried here")
	return b.String()
}

// moving judges direction k's measurements; ok false when they agree.
func (s *searcher) moving(k Kind) (Moving, bool) {
	c := s.choice(k)
	l := c.Line
	m := Moving{Kind: k}
	seen := withoutStalls(l.body())
	if sorted := slices.Sorted(slices.Values(seen)); !c.Slow && len(sorted) >= 4 && sorted[1] > 0 && float64(sorted[len(sorted)-2]) > moveSpread*float64(sorted[1]) {
		m.Why = fmt.Sprintf("while it was measured its seconds carried from %d to %d kbit/s of goodput", sorted[1], sorted[len(sorted)-2])
	}
	for _, st := range s.r.Steps {
		if st.Kind != k || l.RateKbit <= 0 || l.GoodputKbit <= 0 {
			continue
		}
		carries := float64(l.GoodputKbit) * float64(st.RateKbit) / float64(l.RateKbit)
		if m.Why == "" && st.RateKbit <= int(0.9*float64(l.RateKbit)) && float64(st.GoodputKbit) < moveFell*carries {
			m.Why = fmt.Sprintf("at %d kbit/s, under the line's %d, it carried %d kbit/s of goodput, %.0f%% of what that rate carries", st.RateKbit, l.RateKbit, st.GoodputKbit, 100*float64(st.GoodputKbit)/carries)
		}
		if float64(st.GoodputKbit) < 0.9*carries || st.RateKbit > l.RateKbit {
			seen = append(seen, st.GoodputKbit) // the link's, not the shaper's
		}
	}
	if m.Why == "" {
		return m, false
	}
	slices.Sort(seen)
	rate := func(g int) int { return int(math.Round(float64(g)*s.c.RatePerGoodput + s.c.ProbeKbit)) }
	// autorate refuses a floor under the least rate a shaper runs at: an
	// outage's second is no floor to recommend (TestMovingLine)
	m.FloorKbit = max(rate(seen[len(seen)/10]), config.MinRateKbit)
	m.CeilKbit = max(rate(seen[(len(seen)*9)/10]), m.FloorKbit)
	return m, true
}

// body is the line's seconds past slow start, without the teardown.
func (l Line) body() []int {
	ps := l.PerSecond
	if len(ps) < 4 {
		return slices.Clone(ps)
	}
	return slices.Clone(ps[2 : len(ps)-1])
}

// withoutStalls replaces each stall and its catch-up (a second under 90 %
// of the median, the next over 110 %, their mean within 5 % of it: the
// bytes were late, not missing) with their mean (TestWithoutStalls).
func withoutStalls(secs []int) []int {
	if len(secs) < 3 {
		return secs
	}
	med := float64(slices.Sorted(slices.Values(secs))[len(secs)/2])
	for i := 0; i+1 < len(secs); i++ {
		lo, hi := float64(secs[i]), float64(secs[i+1])
		if mean := (lo + hi) / 2; lo < 0.9*med && hi > 1.1*med && math.Abs(mean/med-1) <= 0.05 {
			secs[i], secs[i+1] = int(mean), int(mean)
			i++
		}
	}
	return secs
}

// checkMoving is the search's last word: a MovingError when a direction's
// measurements disagree.
func (s *searcher) checkMoving() error {
	var e MovingError
	for _, k := range []Kind{Download, Upload} {
		if m, ok := s.moving(k); ok {
			s.say("%s line moves: %s", k, m.Why)
			e.Dirs = append(e.Dirs, m)
		}
	}
	if len(e.Dirs) == 0 {
		return nil
	}
	return &e
}
