package bbresult

import (
	"math"
	"slices"
)

// Percentile of sorted values, p in 0..100, interpolating linearly between
// the two nearest ranks (numpy's default, and what flent reports).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	r := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(r))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := r - float64(lo)
	return sorted[lo] + f*(sorted[lo+1]-sorted[lo])
}

// Steady returns the added latency (median and p95 over the idle-before
// median, ms) of phase name's probes from skip seconds into the phase on:
// the steady state, without the slow-start transient with which every
// download-bearing phase starts when the shaper sits behind the bottleneck
// (docs/design.md, "Tuning"). ok is false when the phase or its baseline
// has no replied probe (TestSteady).
//
// A phase shorter than long seconds whose start-up was still draining
// when judging began (the added median of the judged part's first half
// more than twice its second's, and by more than startFall) is judged as
// the phase of long seconds it stands for: the seconds it did not run go
// as its second half went; in the long phase the start-up is a few
// percent of the probes (TestSteadyStandsForLong). The same holds for a
// start-up that drained within the first half, the p95 over twice the
// second half's and more than startTail above it (TestSteadyRecordedTail).
// A delay that rose through the phase (a queue still growing) is judged
// as it is.
func Steady(r *Result, name string, skip, long float64) (med, p95 float64, ok bool) {
	var ph, idle *Phase
	for i := range r.Phases {
		switch r.Phases[i].Name {
		case name:
			ph = &r.Phases[i]
		case PhaseIdleBefore:
			idle = &r.Phases[i]
		}
	}
	if ph == nil || idle == nil {
		return 0, 0, false
	}
	in := func(from, to float64) []float64 {
		var v []float64
		for _, p := range r.Samples.Probes {
			if p.Lost == "" && p.T >= from && p.T < to {
				v = append(v, p.RTT)
			}
		}
		slices.Sort(v)
		return v
	}
	base, load := in(idle.Start, idle.End), in(ph.Start+skip, ph.End)
	if len(base) == 0 || len(load) == 0 {
		return 0, 0, false
	}
	b := Percentile(base, 50)
	from, to := ph.Start+skip, ph.End
	mid := (from + to) / 2
	first, second := in(from, mid), in(mid, to)
	if rest := long - (ph.End - ph.Start); rest > 0 && len(first) > 0 && len(second) > 0 {
		fell := func(pct, by float64) bool {
			f, s := Percentile(first, pct)-b, Percentile(second, pct)-b
			return f > 2*s && f-s > by
		}
		if fell(50, startFall) || fell(95, startTail) {
			for range int(math.Round(rest / (to - mid))) {
				load = append(load, second...)
			}
			slices.Sort(load)
		}
	}
	return Percentile(load, 50) - b, Percentile(load, 95) - b, true
}

// startFall is the least fall of the added median from a short phase's
// first half to its second that Steady takes for a start-up draining: A+'s
// 5 ms median bar, the finest difference a grade tells apart; a steady
// phase's halves differ by a ms or two.
const startFall = 5.0

// startTail is the least fall of the added p95 from a short phase's first
// half to its second that Steady takes for a start-up draining: A+'s p95
// bar. A steady phase's tail, or a spike shorter than a twentieth of a
// half, moves it by less.
const startTail = 15.0
