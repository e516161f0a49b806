package search

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// bidirLowerings bounds how often the rates are lowered for the
// bidirectional phase, by one to three BidirStep each time (missSteps).
// BidirStep, tune's smallest lowering, is 2 %: the sweep puts the
// bidirectional best 1–3 % under the one-way best, so a larger step
// overshoots it (TestBidirLowers).
const (
	bidirLowerings = 4
	BidirStep      = 0.02
)

// bidirReserve is the steps a bounded search keeps for the bidirectional
// check: a miss, a lowering by several steps at once, a borderline one
// measured twice (the model of vdsl's 6 % lower bidirectional knee takes
// four).
const bidirReserve = 4

// MinSteps is the smallest bound a search can finish in: two steps per
// direction and the bidirectional reserve.
const MinSteps = 4 + bidirReserve

// missSteps is how many BidirStep a bidirectional miss is worth: its
// delay as a multiple of the bar, rounded, 1 to 3. A miss by twice the bar
// is farther from the knee than one step, and each step costs a phase or
// two of the budget (TestBidirLowers).
func missSteps(t Target, med, p95 float64) float64 {
	return max(1, min(3, math.Round(bars(t, med, p95))))
}

// bars is a delay in multiples of t's bars: the larger of its median's
// and its p95's.
func bars(t Target, med, p95 float64) float64 { return max(med/t.MedianMs, p95/t.P95Ms) }

// leftToBar is the share of its rate that the direction l lowered is
// still above the bar, after l took the miss from l.miss to st: where the
// line through both misses, delay against rate, meets the bar. Past the
// knee a FIFO fills with the rate in excess of the link's, so a short
// phase's delay grows in step with that excess (TestBidirLoweringBySecant).
// Not ok when the miss did not fall: no line then.
func leftToBar(t Target, l lowering, st Step, rate int) (share float64, ok bool) {
	x0, x1 := bars(t, l.miss.AddedMedian, l.miss.AddedP95), bars(t, st.AddedMedian, st.AddedP95)
	if x0 <= x1 || rate >= l.rate {
		return 0, false
	}
	return (x1 - 1) / (x0 - x1) * float64(l.rate-rate) / float64(rate), true
}

// bidir checks both directions loaded at once at the chosen rates; the
// ACKs of each direction then share the other's queue, so it can miss
// where each alone met the target. Both rates come down a little until it
// meets it.
func (s *searcher) bidir(ctx context.Context) error {
	d, u := &s.r.Download, &s.r.Upload
	// The one-way phases found each knee with the other direction idle;
	// beside its stream the knee is lower by the ACKs the shaper does not
	// count.
	for _, c := range []*Choice{d, u} {
		if c.AckKbit > 0 {
			c.RateKbit -= c.AckKbit
			c.also(RuleAckFraming, "; %d kbit/s lower beside the other direction's stream, whose ACKs cost more on the link than the shaper counts", c.AckKbit)
		}
	}
	var last lowering
	var f frontier
	// n counts the lowerings for a queue; a CPU-bound miss's (cpuLower)
	// are bounded by the budget alone: each follows the saturated core
	// down, however far the router's ceiling is under the line.
	for n := 0; ; {
		st, p, err := s.tryBidir(ctx, d.RateKbit, u.RateKbit)
		if err != nil {
			return err
		}
		s.r.BidirMedian, s.r.BidirP95, s.r.BidirGoodputDn, s.r.BidirGoodputUp = st.AddedMedian, st.AddedP95, p.DownKbit, p.UpKbit
		if st.Pass {
			s.atLineUnsettled(st)
			return nil
		}
		cpu := p.CPU != nil && p.CPU.Bound
		if !cpu && f.see(st, p, d, u) {
			return s.flatBidir(f, d, u)
		}
		cs := toLower(st, p, s.target(Bidir).MedianMs, d, u, last)
		if n == bidirLowerings && !cpu {
			return fmt.Errorf("bidirectional: %w: still +%.1f/+%.1f ms after lowering the rates %d times",
				ErrNoRate, st.AddedMedian, st.AddedP95, n)
		}
		// With no phase left for it, the lowering still stands: the confirming
		// test, already in the budget, has a bidirectional phase and is its
		// measurement (TestBidirMissOutOfBudget).
		short := !s.afford(s.cost(Bidir))
		s.r.BidirLowered++
		if cpu {
			cs, f = s.cpuLower(*p.CPU, p, d, u), frontier{}
		} else {
			n++
		}
		step := BidirStep * missSteps(s.target(Bidir), st.AddedMedian, st.AddedP95)
		if len(cs) == 1 && cs[0] == last.c {
			if left, ok := leftToBar(s.target(Bidir), last, st, last.c.RateKbit); ok {
				step = max(BidirStep, min(step, left))
			}
		}
		last = lowering{}
		if len(cs) == 1 {
			last = lowering{c: cs[0], rate: cs[0].RateKbit, why: cs[0].Why, rules: slices.Clone(cs[0].Rules), miss: st}
		}
		for _, c := range cs {
			if cpu {
				continue // cpuLower moved it
			}
			// Above the measured line the delay is a cliff, not a slope: the size of
			// the miss says nothing of the distance to the knee, so back to the line
			// first (TestBidirAboveLineFirst).
			if line := c.bidirLine(); c.RateKbit > line && float64(line) >= float64(c.RateKbit)*(1-step) {
				c.also(RuleBackToLine, "; back to the line rate from %.1f%% of it for the bidirectional phase", 100*float64(c.RateKbit)/float64(line))
				c.RateKbit = line
				continue
			}
			c.RateKbit = int(float64(c.RateKbit) * (1 - step))
			c.also(RuleLowered, "; lowered %.0f%% for the bidirectional phase", 100*step)
		}
		if short {
			for _, c := range cs {
				c.also(RuleUnmeasured, " (the budget left no phase to measure it: the confirming test does)")
				c.Rules = append(c.Rules, RuleBudgetBound)
			}
			s.say("bidirectional: +%.1f/+%.1f ms and no phase left in the budget: lowered, for the confirming test to judge", st.AddedMedian, st.AddedP95)
			return nil
		}
	}
}

// cpuFit is the busiest core's share a CPU-bound bidirectional phase's
// rates are lowered to: under cpuload.BoundShare by the variation of the
// load between phases.
const cpuFit = 0.8

// cpuLower lowers both directions after a bidirectional miss whose
// busiest core was saturated: the delay was the CPU's backlog (packets
// waiting in the NIC ring and the softirq queue), not a queue either
// shaper holds, and both directions load that core, so both come down by
// the share that brings its load, linear in the shaped rate, to cpuFit
// (TestBidirCPUBound).
func (s *searcher) cpuLower(c bbresult.PhaseCPU, p Phase, d, u *Choice) []*Choice {
	share := s.r.lowerForCPU(c, p)
	s.say("bidirectional: CPU-bound at %d kbit/s together (cpu%d busy %.0f%%): both rates lowered %.0f%%", p.DownKbit+p.UpKbit, c.Busiest, 100*c.BusiestShare, 100*share)
	return []*Choice{d, u}
}

// lowerForCPU lowers both directions of r by the share that brings phase
// p's saturated core c to cpuFit, keeps p as the router's bidirectional
// ceiling, and returns the share.
func (r *Result) lowerForCPU(c bbresult.PhaseCPU, p Phase) float64 {
	k := min(1-BidirStep, cpuFit/max(c.BusiestShare, cpuFit))
	r.BidirCPU = &c
	for _, ch := range []*Choice{&r.Download, &r.Upload} {
		ch.RateKbit = int(float64(ch.RateKbit) * k)
		ch.also(RuleCPUBound, "; lowered %.0f%% with the other direction: both loaded, the router's cpu%d was busy %.0f%% at %d kbit/s together, its ceiling", 100*(1-k), c.Busiest, 100*c.BusiestShare, p.DownKbit+p.UpKbit)
	}
	return 1 - k
}

// lowering is a bidirectional lowering that moved one direction: that
// direction, its rate and reason before it, and the miss that led to it.
type lowering struct {
	c     *Choice
	rate  int
	why   string
	rules []Rule
	miss  Step
}

// toLower picks the directions to lower after the bidirectional miss st
// (phase p) against the median bar, last being the lowering before it,
// which it puts back when it did not lower that direction's delay.
func toLower(st Step, p Phase, bar float64, d, u *Choice, last lowering) []*Choice {
	cs := lowered(p, bar, d, u)
	// A direction above its measured line goes back to it first, whichever
	// one-way delay the miss showed: the line is what the link carried with
	// both directions' streams and ACKs (TestBidirAboveLineFirst).
	if above := aboveLines(d, u); len(above) > 0 {
		cs = above
	}
	// A lowering that did not lower the delay moved the direction whose queue
	// it is not: put that one back and lower the other (TestBidirWrongDirection).
	if last.c != nil && !helped(last, st, u) {
		other := u
		if last.c == u {
			other = d
		}
		// never back above its line: the move that brought it there was the
		// line's rule, not a guess at whose queue it was (TestBidirBackToLineStays)
		last.c.RateKbit, last.c.Why, last.c.Rules = min(last.rate, last.c.bidirLine()), last.why, slices.Clone(last.rules)
		last.c.also(RuleUselessLowering, "; lowering it did not lower the bidirectional delay (+%.1f, then +%.1f ms): kept", last.miss.AddedMedian, st.AddedMedian)
		cs = []*Choice{other}
	}
	return cs
}

// helped says whether the lowering l lowered the bidirectional delay: the
// whole added delay fell, or the lowered direction's own one-way delay
// fell while the other's rose, the miss having moved to the other's queue
// (TestBidirLoweringHelpedItsOwn). A fall of the lowered direction's delay
// alone, the other's unchanged, is within the split's clock-offset error.
// A rise of its own delay is noise: a lower rate cannot queue more in its
// own shaper, so the lowering stands (TestBidirOwnDelayRoseIsNoise).
func helped(l lowering, st Step, u *Choice) bool {
	if st.AddedMedian < flatDelay*l.miss.AddedMedian {
		return true
	}
	if l.miss.AddedDown+l.miss.AddedUp <= 0 || st.AddedDown+st.AddedUp <= 0 {
		return false
	}
	own0, own1, other0, other1 := l.miss.AddedDown, st.AddedDown, l.miss.AddedUp, st.AddedUp
	if l.c == u {
		own0, own1, other0, other1 = other0, other1, own0, own1
	}
	if flatDelay*own1 > own0 {
		return true
	}
	return own1 < flatDelay*own0 && flatDelay*other1 > other0
}

// atLineUnsettled takes a direction at or above its measured line one
// BidirStep lower when the bidirectional pass beside it was borderline and
// the budget had no phase to measure it again. A shaper owns the queue only
// below the bottleneck; at the line its margin is the line measurement's
// error, so a borderline pass there is the least likely to hold
// (TestBidirAtLineUnsettled). The confirming test judges the result.
func (s *searcher) atLineUnsettled(st Step) {
	if st.Again || !Unsure(s.target(Bidir), st.AddedMedian, st.AddedP95) {
		return
	}
	for _, c := range []*Choice{&s.r.Download, &s.r.Upload} {
		if c.RateKbit >= c.bidirLine() {
			s.r.Steps[len(s.r.Steps)-1].Unsettled = true
			c.RateKbit = int(float64(c.RateKbit) * (1 - BidirStep))
			c.also(RuleEdgeAtLine, "; lowered %.0f%% from its line: the bidirectional phase passed on the edge (+%.1f/+%.1f ms) and the budget left no phase to measure it again",
				100*BidirStep, st.AddedMedian, st.AddedP95)
			c.Rules = append(c.Rules, RuleBudgetBound)
		}
	}
}

// bidirLine is c's line beside the other direction's stream: the measured
// line less the ACK framing its shaper does not count.
func (c *Choice) bidirLine() int { return c.Line.RateKbit - c.AckKbit }

// aboveLines are the directions whose rate is above their line beside the
// other direction's stream.
func aboveLines(cs ...*Choice) []*Choice {
	var out []*Choice
	for _, c := range cs {
		if c.RateKbit > c.bidirLine() {
			out = append(out, c)
		}
	}
	return out
}

// tryBidir loads both directions at once at down/up and judges the phase
// (a borderline one twice, as measure does). A borderline pass the budget
// cannot measure again stands, unlike a one-way step's (no step is left to
// lower the rates after it, and the confirming test judges it), except for
// a direction at its line (atLineUnsettled).
func (s *searcher) tryBidir(ctx context.Context, down, up int) (Step, Phase, error) {
	if err := s.l.SetRates(ctx, down, up); err != nil {
		return Step{}, Phase{}, err
	}
	st := Step{Kind: Bidir, RateKbit: down, Other: up, Share: float64(down) / float64(s.r.Download.Line.RateKbit)}
	p, again, err := s.measure(ctx, Bidir)
	if err != nil {
		return st, p, err
	}
	st.Again = again
	st.AddedMedian, st.AddedP95, st.GoodputKbit = p.AddedMedian, p.AddedP95, p.DownKbit
	st.AddedDown, st.AddedUp = p.AddedDown, p.AddedUp
	t := s.target(Bidir)
	st.Target = t.Name
	st.Pass = meets(t, st.AddedMedian, st.AddedP95)
	s.r.Steps = append(s.r.Steps, st)
	s.say("bidirectional at %d/%d kbit/s: +%.1f/+%.1f ms (one-way down +%.1f, up +%.1f)%s", down, up, st.AddedMedian, st.AddedP95, st.AddedDown, st.AddedUp, twice(st.Again))
	return st, p, nil
}

// splitError is how far the one-way split of a delay may be off: the
// clock offset it rests on, estimated from idle probes, errs by a few ms.
const splitError = 5.0

// lowered are the directions to lower after a bidirectional miss, by
// Queued's rule: the download's ingress shaper sits behind the modem, whose
// queue the upload's ACK bursts overrun, so it gives way unless the upload
// carries most of the delay, or both each miss twice the bar (TestBidirLowers).
//
// Beside one slow line (slowLine) it is that line's direction, unless the
// other's one-way delay alone is over the bar by more than the split's
// error and the slow one's under it: the other's ACKs wait in the slow
// line's queue and leave in clumps, so the other's delay is the slow one's
// echo (TestBidirSlowLineLowersItsOwn). A queue of the other's own shows
// alone over the bar once the slow one's is gone.
func lowered(p Phase, bar float64, d, u *Choice) []*Choice {
	if d.Slow != u.Slow {
		slow, other, sd, od := d, u, p.AddedDown, p.AddedUp
		if u.Slow {
			slow, other, sd, od = u, d, p.AddedUp, p.AddedDown
		}
		if od > bar+splitError && sd < bar {
			return []*Choice{other}
		}
		return []*Choice{slow}
	}
	switch down, up := Queued(p.AddedDown, p.AddedUp, bar); {
	case down && up:
		return []*Choice{d, u}
	case up:
		return []*Choice{u}
	}
	return []*Choice{d}
}

// Queued says whose queue a bidirectional phase's delay was, from its
// one-way medians (ms) and the median bar: lowered's rule, which the lab
// also uses to tell which direction's rate a miss speaks for (TestQueued).
//
// Three quarters of the delay make it the upload's, not a half: with a few
// ms of delay the split's clock offset is a large part of it. A direction
// whose one-way delay alone is over the bar by more than the split's error,
// beside one under it, is the one: no lowering of the other brings the sum
// under the bar. Both, when each alone misses twice the bar, or neither
// was measured.
func Queued(addedDown, addedUp, bar float64) (down, up bool) {
	sum := addedDown + addedUp
	switch {
	case sum <= 0 || addedDown > 2*bar && addedUp > 2*bar:
		return true, true
	case addedUp > bar+splitError && addedDown < bar:
		return false, true
	case addedDown > bar+splitError && addedUp < bar:
		return true, false
	case addedUp/sum >= 0.75:
		return false, true
	}
	return true, false
}
