package bbtest

import (
	"math"
	"slices"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// summarize computes order statistics of ms values. Percentiles interpolate
// linearly between the two nearest ranks (numpy's default, and what flent
// reports), so a percentile of a few dozen samples is not just one sample.
// It sorts ms in place.
func summarize(ms []float64) bbresult.Stats {
	if len(ms) == 0 {
		return bbresult.Stats{}
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	return bbresult.Stats{
		N:      len(ms),
		Min:    ms[0],
		Median: percentile(ms, 50),
		Mean:   sum / float64(len(ms)),
		P90:    percentile(ms, 90),
		P95:    percentile(ms, 95),
		P99:    percentile(ms, 99),
	}
}

// percentile of sorted values, p in 0..100.
func percentile(sorted []float64, p float64) float64 {
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

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return percentile(s, 50)
}

// Steady returns the added latency (median and p95 over the idle-before
// median, ms) of phase name's probes from skip seconds into the phase on:
// the steady state, without the slow-start transient with which every
// download-bearing phase starts when the shaper sits behind the bottleneck
// (docs/design.md, "Tuning"). ok is false when the phase or its baseline
// has no replied probe.
func Steady(r *bbresult.Result, name string, skip float64) (med, p95 float64, ok bool) {
	var ph, idle *bbresult.Phase
	for i := range r.Phases {
		switch r.Phases[i].Name {
		case name:
			ph = &r.Phases[i]
		case bbresult.PhaseIdleBefore:
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
	b := percentile(base, 50)
	return percentile(load, 50) - b, percentile(load, 95) - b, true
}
