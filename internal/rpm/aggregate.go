package rpm

import (
	"math"
	"slices"
)

// Parameters of draft-ietf-ippm-responsiveness ("Test Parameters"); the
// defaults there are what Apple's networkQuality and goresponsiveness use,
// so results stay comparable.
const (
	mad           = 4    // MAD: intervals in a moving average
	trimPercent   = 5    // 100 − TMP: the slowest 5% of probes are dropped
	stdTolerance  = 0.05 // SDT: stable when stddev < 5% of the current value
	probeShare    = 0.05 // PTC: probes may use 5% of the measured goodput
	probePairSize = 6000 // bytes of one foreign (≈5000) plus one self probe (≈1000)
)

// latencies are the probe times of one window, in milliseconds. TLS holds
// handshake times already divided by the handshake's round trips.
type latencies struct {
	TCP, TLS, HTTPForeign, HTTPSelf []float64
}

func (l *latencies) add(o latencies) {
	l.TCP = append(l.TCP, o.TCP...)
	l.TLS = append(l.TLS, o.TLS...)
	l.HTTPForeign = append(l.HTTPForeign, o.HTTPForeign...)
	l.HTTPSelf = append(l.HTTPSelf, o.HTTPSelf...)
}

// trimmedMean is the draft's single-sided trimmed mean: the slowest
// trimPercent of the samples (rounded down) are discarded, because one stuck
// handshake should not decide the score, while a consistently slow queue
// should. NaN when there are no samples.
func trimmedMean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	s = s[:len(s)-len(s)*trimPercent/100]
	var sum float64
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

// means are the trimmed means of one window, the inputs of the RPM formula.
type means struct {
	TCP, TLS, HTTPForeign, HTTPSelf float64
}

func (l latencies) means() means {
	return means{trimmedMean(l.TCP), trimmedMean(l.TLS), trimmedMean(l.HTTPForeign), trimmedMean(l.HTTPSelf)}
}

// rpm implements the draft's aggregation (draft-ietf-ippm-responsiveness-08,
// "Aggregating the Measurements"): the RPM on fresh connections and the RPM
// on the loaded connections are averaged as rates, so neither kind of delay
// can hide the other:
//
//	foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)
//	loaded  = 60000 / TM(http_l)
//	RPM     = (foreign + loaded) / 2
//
// Earlier drafts averaged the latencies instead (60000 / (foreign_ms/2 +
// loaded_ms/2)), which weighs the slower kind more; we follow the current
// text. NaN when a kind of probe is missing.
func (m means) rpm() float64 {
	foreign := 60000 / ((m.TCP + m.TLS + m.HTTPForeign) / 3)
	loaded := 60000 / m.HTTPSelf
	r := (foreign + loaded) / 2
	if math.IsInf(r, 0) {
		return math.NaN()
	}
	return r
}

// delay is what the responsiveness's stability is judged on: the mean of
// the foreign round trip and the loaded GET, in milliseconds (NaN when a
// kind is missing). The RPM's mean of two rates follows the faster kind:
// with foreign probes at 45 ms a loaded GET that climbs from 1.5 to 2 s
// moves it by 1 %, and it would pass the draft's 5 % test while the
// queue behind the load still grows; the delay moves by a third.
// goresponsiveness judges the sum of the two, the same test
// (TestStabilityFollowsLoadedDelay).
func (m means) delay() float64 {
	return ((m.TCP+m.TLS+m.HTTPForeign)/3 + m.HTTPSelf) / 2
}

// stable reports whether the last mad values agree within stdTolerance of
// the newest one — the draft's test for both goodput and responsiveness.
func stable(xs []float64) bool {
	if len(xs) < mad {
		return false
	}
	w := xs[len(xs)-mad:]
	cur := w[len(w)-1]
	var mean float64
	for _, x := range w {
		mean += x
	}
	mean /= float64(len(w))
	var v float64
	for _, x := range w {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v/float64(len(w))) < stdTolerance*cur
}

// MaxRate is the draft's MPS: probe pairs (a foreign and a self probe) per
// second at most.
const MaxRate = 100

// probeRate is the number of probe pairs per second allowed at a goodput of
// bytesPerSec: PTC of the capacity, at least one, at most most.
func probeRate(bytesPerSec float64, most int) float64 {
	return max(1, min(float64(most), probeShare*bytesPerSec/probePairSize))
}
