package bbclient

import (
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
		Median: bbresult.Percentile(ms, 50),
		Mean:   sum / float64(len(ms)),
		P90:    bbresult.Percentile(ms, 90),
		P95:    bbresult.Percentile(ms, 95),
		P99:    bbresult.Percentile(ms, 99),
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return bbresult.Percentile(s, 50)
}
