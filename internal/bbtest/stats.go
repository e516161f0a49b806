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
