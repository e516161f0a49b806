package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// slowLine: one full-size packet takes longer than twice A+'s median bar
// at line l's rate (under about 1.2 Mbit/s). There every phase beside the
// other direction's stream starts with a modem queue that drains for longer
// than a step lasts, so its bidirectional phases are long (TestSlowLineLongBidir).
func (s *searcher) slowLine(l Line) bool { return s.packetMs(l) > 2*APlus.MedianMs }

// markSlow marks the slow lines, which make the bidirectional phases
// LongPhases (Result.longBidir). The confirming test's bidirectional
// phase is long too; the budget's phase for measuring a missed confirm
// phase again pays for it (Live.fixedCost).
func (s *searcher) markSlow() {
	for _, k := range []Kind{Download, Upload} {
		c := s.choice(k)
		if c.Slow = s.slowLine(c.Line); !c.Slow {
			continue
		}
		s.say("%s line: one full-size packet takes %.1f ms at %d kbit/s, so a phase beside the other direction's stream starts with a queue that drains for longer than a step: every bidirectional phase runs %d steps long", k, s.packetMs(c.Line), c.Line.RateKbit, LongSteps)
		if k == Upload {
			s.l.SlowUpload()
			s.say("upload line: slow, so tune's own upload goes one segment per packet, as a router's clients' packets arrive (a pair let out back to back is %.0f ms in the modem)", 2*s.packetMs(c.Line))
		}
	}
}

// packetMs is how long one full-size packet takes at line l's rate, in the
// shaper's count of its frame. Behind the packet in flight a probe waits
// half of that on average at the shaper, and again at the modem: a delay
// no shaper rate removes. A target whose median bar is under half a packet
// time is out of reach there, and proving it would spend two steps a slow
// link's search needs (TestPacketTimeSettlesAtOnce).
func (s *searcher) packetMs(l Line) float64 {
	if l.RateKbit <= 0 {
		return 0
	}
	return s.c.RatePerGoodput * plan.SegmentPayload * 8 / float64(l.RateKbit)
}

// line measures the unshaped line in direction k.
func (s *searcher) line(ctx context.Context, k Kind) (Line, error) {
	s.say("%s: measuring the line (shaper open)", k)
	p, err := s.l.Load(ctx, k, LinePhase)
	if err != nil {
		return Line{}, err
	}
	ps := p.PerSecond
	if len(ps) < 4 {
		return Line{}, fmt.Errorf("%s line measurement: %d seconds of goodput, want at least 4", k, len(ps))
	}
	// Behind a boost the sustained rate is the mean of the last third, by
	// which any boost is spent; a mean, not a median, because a stalled second
	// moves bytes into the next one's count. The last second, with the
	// streams' teardown, is left out, and a window that would split a stall
	// from its catch-up takes both (TestLineSeries).
	body := ps[:len(ps)-1]
	// The level to judge a window's edges by: the phase after slow start,
	// whose stalls and a boost's seconds are the few. A second that strays
	// from it by more than a tenth is a stall or a catch-up.
	m := medianInt(body[min(2, len(body)-1):])
	off := func(v int) float64 { return float64(v)/m - 1 }
	stall := func(a, b int) bool {
		x, y := off(a), off(b)
		return math.Abs(x) > 0.1 && math.Abs(y) > 0.1 && x*y < 0
	}
	// A last second above the level is no teardown but the catch-up of the
	// stalls before it, whose bytes moved inside the window: it stays
	// (TestLineSeries, "catch-up last"; TestLineBoostStallAtEnd).
	if off(ps[len(ps)-1]) > 0.1 {
		body = ps
	}
	start := len(body) - max(len(body)/3, min(4, len(body)))
	if start > 0 && stall(body[start-1], body[start]) {
		start--
	}
	l := Line{GoodputKbit: meanInt(body[start:]), PerSecond: ps}
	// A boost is a plateau: seconds 2-4 (past slow start, inside any boost
	// worth the name) each above the sustained rate. Not their mean: behind a
	// deep FIFO a slow link's seconds alternate with the ACKs' clumps
	// (TestLineSeries, "alternating seconds").
	if plateau := ps[1:4]; slices.MinFunc(plateau, cmp.Compare) > int(BoostRatio*float64(l.GoodputKbit)) {
		l.BoostKbit = meanInt(plateau)
	} else {
		// No boost to skip, so the whole phase past slow start is the
		// line, not its last third, which on a slow link is a few clumps.
		l.GoodputKbit = meanInt(body[min(2, len(body)-1):])
	}
	per := s.c.RatePerGoodput
	if p.IPv6 {
		per *= plan.V6PerGoodput
	}
	l.RateKbit = int(math.Round(float64(l.GoodputKbit)*per + s.c.ProbeKbit))
	if l.GoodputKbit <= 0 {
		return l, fmt.Errorf("%s: no goodput through the line; is the server reachable and the link up?", k)
	}
	msg := fmt.Sprintf("%s line: %d kbit/s goodput sustained (shaper rate %d)", k, l.GoodputKbit, l.RateKbit)
	if l.BoostKbit > 0 {
		msg += fmt.Sprintf("; %d kbit/s in the first seconds was a boost, not the line", l.BoostKbit)
	}
	if c := p.CPU; c != nil && c.Bound {
		// the search goes on below it: the highest rate that keeps the
		// grade on this router is what the user can have (TestLineCPUBound)
		l.CPU = c
		msg += fmt.Sprintf("; CPU-bound: cpu%d was busy %.0f%% of it (%.0f%% softirq): %s", c.Busiest, 100*c.BusiestShare, 100*c.BusiestSoftirq, cpuload.WhoseCeiling(*c))
	}
	s.say("%s", msg)
	return l, nil
}

// MeasureLine is the line in direction k as a search measures it (the
// caller has opened the shaper): its sustained goodput and the shaper rate
// that carries it. The watch's scheduled check measures the line with it.
func MeasureLine(ctx context.Context, l Link, c Config, k Kind) (Line, error) {
	return (&searcher{l: l, c: c}).line(ctx, k)
}
