package cpuload

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/sampler"
)

// Shaper is what Costs knows of the queue: its device and the device's
// receive steering mask (RPS), its qdisc, and its rates in kbit/s.
type Shaper struct {
	Device, RPS, XPS, Qdisc string
	Down, Up                int
}

// BoundShare: a core busy this share of a phase is saturated: the rest is
// the kernel's own bookkeeping and the moments between bursts.
const BoundShare = 0.90

// shaperShare: goodput at this share of the shaper's rate is what the
// shaper lets through (headers and ACKs take the rest): the shaper, not the
// CPU, held it.
const shaperShare = 0.85

// selfShare: a test that took this much of a core itself (a router
// running the load over TLS) was its own competitor on a saturated core.
const selfShare = 0.25

// SelfBound says whether c was CPU-bound with the test itself among the
// load on the router's CPU (selfShare of a core or more): the router then
// shapes more than c's rate when the test runs elsewhere.
func SelfBound(c bbresult.PhaseCPU) bool { return c.Bound && c.SelfCores >= selfShare }

// WhoseCeiling says whose a CPU-bound phase c's ceiling is: the router's,
// or, when tune's own load took a share of the CPU (SelfBound: its TLS to
// a responsiveness server, on the router), the router's while it also ran
// tune (TestPrintTuneCPUBound, TestLineCPUBound).
func WhoseCeiling(c bbresult.PhaseCPU) string {
	if SelfBound(c) {
		return fmt.Sprintf("that is the router's ceiling while tune's own load and TLS took %.0f%% of a core of it: it shapes more with the test elsewhere, and tune against sqmkit serve (plain TCP) costs it less", 100*c.SelfCores)
	}
	return "that is the router's ceiling, not the line's"
}

// minShaped is the least shaped rate, in Mbit/s, whose cost is judged: a
// phase that moved nothing costs nothing per Mbit.
const minShaped = 0.2

// Costs sets each loaded phase of res beside the CPU samples taken during
// it: the CPU time it cost per shaped Mbit, its busiest core and the
// ceiling that implies (TestCosts). A phase whose goodput reached
// shaperShare of sh's rates was held by the shaper, not the CPU. A
// CPU-bound phase is also a note of res, with the fix.
func Costs(res *bbresult.Result, samples []Sample, sh Shaper) []bbresult.PhaseCPU {
	var out []bbresult.PhaseCPU
	for _, ph := range res.Phases {
		if ph.Grade == "" && (ph.Name == bbresult.PhaseIdleBefore || ph.Name == bbresult.PhaseIdleAfter) {
			continue
		}
		from := res.Started.Add(time.Duration(ph.Start * float64(time.Second)))
		to := res.Started.Add(time.Duration(ph.End * float64(time.Second)))
		a, b, ok := window(samples, from, to)
		shaped := ph.DownloadMbps + ph.UploadMbps
		if !ok || shaped < minShaped {
			continue
		}
		c := cost(a, b, shaped)
		c.Phase, c.Device, c.RPS, c.XPS = ph.Name, sh.Device, sh.RPS, sh.XPS
		c.Bound = c.Bound && !heldByShaper(ph, sh.Down, sh.Up)
		out = append(out, c)
		switch {
		case SelfBound(c):
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the router's CPU was the limit, and this test took %.0f%% of a core of it itself (its load and TLS): cpu%d was busy %.0f%% at %.1f Mbit/s shaped, so the router shapes more than that when the test runs elsewhere; fix: run sqmkit test from a computer behind the router for the line's rate and grade", ph.Name, 100*c.SelfCores, c.Busiest, 100*c.BusiestShare, shaped))
		case c.Bound:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the router's CPU was the limit: cpu%d was busy %.0f%% of the phase (%.0f%% of it in softirq, packet processing) at %.1f Mbit/s shaped; this router shapes about that much with this qdisc, whatever the line can do; fix: %s", ph.Name, c.Busiest, 100*c.BusiestShare, 100*c.BusiestSoftirq, shaped, Fix(c, sh.Qdisc)))
		}
	}
	return out
}

// heldByShaper: every direction the phase loaded reached shaperShare of
// its shaper's rate.
func heldByShaper(ph bbresult.Phase, down, up int) bool {
	held, loaded := true, false
	for _, d := range []struct {
		mbps float64
		kbit int
	}{{ph.DownloadMbps, down}, {ph.UploadMbps, up}} {
		if d.mbps < minShaped {
			continue
		}
		loaded = true
		held = held && d.kbit > 0 && d.mbps*1000 >= shaperShare*float64(d.kbit)
	}
	return loaded && held
}

// Fix is what to change on a router whose CPU bound a phase c with qdisc
// (the queue's: cake, fq_codel, ...), most specific first (TestFix).
func Fix(c bbresult.PhaseCPU, qdisc string) string {
	var fixes []string
	if c.CPUs > 1 && c.NetRxShare >= 0.8 && c.RPS == "" {
		fixes = append(fixes, fmt.Sprintf("spread packet processing over the %d cores: cpu%d handled %.0f%% of the receive softirqs and receive steering is off (set /sys/class/net/%s/queues/rx-*/rps_cpus, or packet steering in LuCI's Network → Interfaces → Global)", c.CPUs, c.NetRxCPU, 100*c.NetRxShare, cmp.Or(c.Device, "DEV")))
	}
	if c.CPUs > 1 && c.IRQShare >= 0.8 {
		fixes = append(fixes, fmt.Sprintf("cpu%d took %.0f%% of %s's interrupts: spread them (irqbalance, or /proc/irq/N/smp_affinity per queue vector)", c.IRQCPU, 100*c.IRQShare, cmp.Or(c.Device, "the device")))
	}
	if qdisc == "cake_mq" {
		fixes = append(fixes, "cake_mq can cost more than it spreads (a 4-queue router filled two cores at 50 Mbit/s where cake took 15% of one): measure with option qdisc 'cake' too, and the doctor compares the two")
	}
	if qdisc == "cake" || qdisc == "cake_mq" {
		fixes = append(fixes, "fq_codel (sqmkit-fq_codel.qos) costs less per packet than cake")
	}
	fixes = append(fixes, "a rate at or under this ceiling keeps the delay low; beyond it, hardware offload (a Qualcomm NSS router's sqmkit-nss.qos) or a faster router")
	return strings.Join(fixes, "; ")
}

// window is the first sample at or after from and the last at or before
// to, when they span at least half the phase.
func window(samples []Sample, from, to time.Time) (a, b Sample, ok bool) {
	ai, bi := -1, -1
	for i, s := range samples {
		if ai < 0 && !s.At.Before(from) {
			ai = i
		}
		if !s.At.After(to) {
			bi = i
		}
	}
	if ai < 0 || bi <= ai || samples[bi].At.Sub(samples[ai].At) < to.Sub(from)/2 {
		return a, b, false
	}
	return samples[ai], samples[bi], true
}

// cost is what the interval a..b cost at shaped Mbit/s.
func cost(a, b Sample, shaped float64) bbresult.PhaseCPU {
	n := min(len(a.Cores), len(b.Cores))
	c := bbresult.PhaseCPU{ShapedMbps: shaped, CPUs: n, From: a.At, To: b.At}
	var busy, total float64
	for i := range n {
		db := float64(b.Cores[i].Busy - a.Cores[i].Busy)
		dt := float64(b.Cores[i].Total - a.Cores[i].Total)
		if dt <= 0 {
			continue
		}
		busy, total = busy+db, total+dt
		if share := db / dt; share > c.BusiestShare {
			c.Busiest, c.BusiestShare = i, share
			if db > 0 {
				c.BusiestSoftirq = float64(b.Cores[i].Softirq-a.Cores[i].Softirq) / db
			}
		}
	}
	if total <= 0 {
		return c
	}
	perCore := total / float64(n) // ticks of one core over the interval
	c.SelfCores = float64(b.Self-a.Self) / perCore
	c.BusyCores = max(busy-float64(b.Self-a.Self), 0) / perCore
	c.MsPerMbit = c.BusyCores * 1000 / shaped
	c.NetRxCPU, c.NetRxShare = busiest(a.NetRx, b.NetRx)
	c.NetTxCPU, c.NetTxShare = busiest(a.NetTx, b.NetTx)
	c.IRQCPU, c.IRQShare = busiest(a.IRQ, b.IRQ)
	// the rate at which the busiest core, or all of them, would be full,
	// if the load grows with the rate: the nearer of the two
	c.CeilingMbps = shaped / max(c.BusiestShare, 1e-3)
	if c.BusyCores > 0 {
		c.CeilingMbps = min(c.CeilingMbps, shaped*float64(n)/c.BusyCores)
	}
	c.Bound = c.BusiestShare >= BoundShare
	return c
}

// busiest is the CPU whose count grew most from a to b, and its share of
// the growth (0 when nothing grew).
func busiest(a, b []uint64) (cpu int, share float64) {
	var sum, most uint64
	for i := range min(len(a), len(b)) {
		d := b[i] - a[i]
		sum += d
		if d > most {
			cpu, most = i, d
		}
	}
	if sum == 0 {
		return 0, 0
	}
	return cpu, float64(most) / float64(sum)
}

// sampleEvery: two reads a second give a 6 s phase twelve, at three small
// /proc files each.
const sampleEvery = 500 * time.Millisecond

// Sampling reads the counters under root (dev's interrupts among them)
// until stop closes, and then sends what it read.
func Sampling(root, dev string, stop <-chan struct{}) <-chan []Sample {
	done := make(chan []Sample, 1)
	go func() {
		done <- sampler.Every(stop, sampleEvery, func() (Sample, error) { return Read(root, dev) })
	}()
	return done
}
