package doctor

import (
	"cmp"
	"fmt"
	"math"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/cpuload"
)

func pct(share float64) int { return int(math.Round(100 * share)) }

// cpu judges the queue of wan against the last measurement of what its
// router's CPU can shape (cpuload.Record): bound, or a ceiling under the
// rate its shaper is set to, is a warning with the fix; room to spare is
// said (TestCPUFindings).
func (c *checker) cpu(wan string) {
	e := c.expect[wan]
	if e == nil || e.CPU == nil {
		return
	}
	r, q := e.CPU, e.Queue
	low := r.Lowest()
	rate := func(p bbresult.PhaseCPU) float64 { // the shaper's rate(s) the phase loaded, Mbit/s
		switch p.Phase {
		case bbresult.PhaseDownload:
			return float64(q.Download) / 1000
		case bbresult.PhaseUpload:
			return float64(q.Upload) / 1000
		}
		return float64(q.Download+q.Upload) / 1000
	}
	subject := fmt.Sprintf("%s CPU (queue %s)", wan, q.Section)
	ev := []string{fmt.Sprintf("%s of %s: %s at %.1f Mbit/s shaped, cpu%d busy %.0f%% (%.0f%% softirq) of %d cores, %.2f ms CPU per Mbit: ceiling ~%.0f Mbit/s",
		r.By, r.At.UTC().Format("2006-01-02 15:04 UTC"), low.Phase, low.ShapedMbps, low.Busiest, 100*low.BusiestShare, 100*low.BusiestSoftirq, low.CPUs, low.MsPerMbit, low.CeilingMbps)}
	ev = append(ev, fmt.Sprintf("packets handled: receive softirqs %d%% on cpu%d, transmit %d%% on cpu%d, %s's interrupts %d%% on cpu%d; RPS %s, XPS %s",
		pct(low.NetRxShare), low.NetRxCPU, pct(low.NetTxShare), low.NetTxCPU, cmp.Or(low.Device, wan), pct(low.IRQShare), low.IRQCPU, cmp.Or(low.RPS, "off"), cmp.Or(low.XPS, "off")))
	switch {
	case low.Bound:
		c.add(Warn, "cpu-bound", subject, fmt.Sprintf("This router shapes about %.0f Mbit/s with %s; %s.", low.ShapedMbps, r.Qdisc, cpuload.Fix(low, r.Qdisc)), ev...)
	case low.CeilingMbps < rate(low):
		ev = append(ev, fmt.Sprintf("the shaper is set to %.0f Mbit/s for %s", rate(low), low.Phase))
		c.add(Warn, "cpu-ceiling", subject, fmt.Sprintf("Its rate is above what this router's CPU can shape; %s.", cpuload.Fix(low, r.Qdisc)), ev...)
	default:
		c.add(OK, "cpu-headroom", subject, "", ev...)
	}
	c.cakeMQ(subject, r)
}

// cake_mq against cake on one router: costing mqCostly times cake's CPU
// per shaped Mbit while shaping at most mqNoGain times cake's ceiling, it
// brings nothing but the cost; shaping mqGain times more, it earns it.
const (
	mqCostly = 1.25
	mqNoGain = 1.1
	mqGain   = 1.25
)

// cakeMQ compares a queue's cake_mq and cake records when it has both (the
// record and its Before): cake_mq that costs more for no more rate is
// flagged with the advice to drop it, as on a 4-queue router whose two
// cores filled at 50 Mbit/s where cake took 15 % of one; cake_mq that
// shapes more where cake runs is said the other way (TestCakeMQFindings).
func (c *checker) cakeMQ(subject string, r *cpuload.Record) {
	if r.Before == nil {
		return
	}
	mq, single := r, r.Before
	if mq.Qdisc == "cake" {
		mq, single = single, mq
	}
	if mq.Qdisc != "cake_mq" || single.Qdisc != "cake" {
		return
	}
	when := func(x *cpuload.Record) string { return x.By + " of " + x.At.UTC().Format("2006-01-02 15:04 UTC") }
	ev := fmt.Sprintf("cake_mq (%s): %.2f ms CPU per shaped Mbit, shapes ~%.0f Mbit/s; cake (%s): %.2f ms per Mbit, ~%.0f Mbit/s",
		when(mq), mq.MsPerMbit(), mq.Ceiling(), when(single), single.MsPerMbit(), single.Ceiling())
	more := 100 * (mq.MsPerMbit()/single.MsPerMbit() - 1)
	switch costly := mq.MsPerMbit() >= mqCostly*single.MsPerMbit() && mq.Ceiling() <= mqNoGain*single.Ceiling(); {
	case costly && r.Qdisc == "cake_mq":
		c.add(Warn, "cake-mq-costly", subject, fmt.Sprintf("cake_mq costs %.0f%% more CPU per Mbit than cake did on this router and shapes no more: drop it (option qdisc 'cake').", more), ev)
	case costly:
		c.add(OK, "cake-mq-costly", subject, "", ev, fmt.Sprintf("cake runs: cake_mq cost %.0f%% more per Mbit here and shaped no more", more))
	case r.Qdisc == "cake" && mq.Ceiling() >= mqGain*single.Ceiling():
		c.add(Warn, "cake-mq-gain", subject, fmt.Sprintf("cake_mq shaped %.0f%% more than cake on this router: use it (option qdisc 'cake_mq').", 100*(mq.Ceiling()/single.Ceiling()-1)), ev)
	}
}
