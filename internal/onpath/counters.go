package onpath

import (
	"fmt"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Sample is the queue's shaper counters at one moment: bytes its upload
// (egress) and download (IFB) roots have sent since they were made.
type Sample struct {
	At       time.Time
	Up, Down uint64
}

// The bounds of agreement between a phase's goodput and what the shaper
// counted for that direction. The shaper counts frames (payload, TCP/IP
// headers and, on ingress and on cells, more: up to a sixth above
// goodput), the probes, and the other direction's ACKs (one per two
// segments: under 3 % of that direction's goodput). Below the low bound
// the test's traffic did not all pass the shaper (flow offloading, another
// route, a proxy on the router); above the high one something else shared
// the link.
const (
	countedLow     = 0.85
	countedHigh    = 1.30
	ackShare       = 0.05
	slackMbps      = 0.3
	minGoodputMbps = 0.2 // below it (a skipped direction) nothing is judged
	// maxUncertain: past it the reads around a phase's edges leave its
	// bytes too loosely placed to judge
	maxUncertain = 0.5
)

// Verdicts of a PathCheck.
const (
	Agrees   = "agrees"
	Bypassed = "bypassed"
	Shared   = "shared"
)

// Check compares each loaded phase of res with the shaper's counters of
// the queue (section) and returns the comparisons; every disagreement is
// also a note of res, so a summary never grades a link silently as what it
// is not (TestCheck).
func Check(res *bbresult.Result, section string, samples []Sample) []bbresult.PathCheck {
	var out []bbresult.PathCheck
	if len(samples) < 2 {
		res.Notes = append(res.Notes, fmt.Sprintf("queue %s: no shaper counters were read (is it started?), so the goodput was not checked against them", section))
		return nil
	}
	for _, ph := range res.Phases {
		from := res.Started.Add(time.Duration(ph.Start * float64(time.Second)))
		to := res.Started.Add(time.Duration(ph.End * float64(time.Second)))
		secs := to.Sub(from).Seconds()
		if secs <= 0 || from.Before(samples[0].At) || to.After(samples[len(samples)-1].At) {
			continue
		}
		for _, d := range []struct {
			name          string
			goodput, back float64
			count         func(Sample) uint64
		}{
			{"download", ph.DownloadMbps, ph.UploadMbps, func(s Sample) uint64 { return s.Down }},
			{"upload", ph.UploadMbps, ph.DownloadMbps, func(s Sample) uint64 { return s.Up }},
		} {
			if d.goodput < minGoodputMbps {
				continue
			}
			a, gapA := at(samples, from, d.count)
			b, gapB := at(samples, to, d.count)
			if b < a {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: queue %s's %s counters went back (the tree was made again): not checked", ph.Name, section, d.name))
				continue
			}
			// a phase's edge falls between two reads, and the bytes
			// between them are spread evenly over it: the bounds widen
			// by that share of the phase (TestCheckSparseReads)
			u := (gapA + gapB) / secs
			if u > maxUncertain {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: queue %s's %s counters were read %.1f s and %.1f s from the phase's edges (a busy host): not checked", ph.Name, section, d.name, gapA, gapB))
				continue
			}
			c := bbresult.PathCheck{Phase: ph.Name, Direction: d.name, GoodputMbps: d.goodput, CountedMbps: (b - a) * 8 / secs / 1e6, Verdict: Agrees}
			switch {
			case c.CountedMbps < countedLow*(1-u)*d.goodput:
				c.Verdict = Bypassed
				res.Notes = append(res.Notes, fmt.Sprintf("%s: queue %s's shaper counted %.1f Mbit/s of the test's %.1f Mbit/s %s: the rest did not pass it (flow offloading, another route, a proxy); this grade is not the shaped link's",
					ph.Name, section, c.CountedMbps, d.goodput, d.name))
			case c.CountedMbps > countedHigh*(1+u)*d.goodput+ackShare*d.back+slackMbps:
				c.Verdict = Shared
				res.Notes = append(res.Notes, fmt.Sprintf("%s: queue %s's shaper counted %.1f Mbit/s %s, the test moved %.1f: about %.1f Mbit/s of other traffic shared the link",
					ph.Name, section, c.CountedMbps, d.name, d.goodput, c.CountedMbps-d.goodput))
			}
			out = append(out, c)
		}
	}
	return out
}

// at is the counter at t, linear between the samples around it, and
// half their span: how far the bytes it places may be from t.
func at(s []Sample, t time.Time, count func(Sample) uint64) (float64, float64) {
	for i := 1; i < len(s); i++ {
		if s[i].At.Before(t) {
			continue
		}
		a, b := s[i-1], s[i]
		span := b.At.Sub(a.At).Seconds()
		if span <= 0 {
			return float64(count(b)), 0
		}
		f := t.Sub(a.At).Seconds() / span
		return float64(count(a)) + f*(float64(count(b))-float64(count(a))), span / 2
	}
	return float64(count(s[len(s)-1])), 0
}
