package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// aqmKinds keep their queue short by themselves; their limit only caps
// bursts, so it is judged against the plan's 200-packet floor too.
var aqmKinds = map[string]bool{"fq_codel": true, "nssfq_codel": true, "codel": true, "fq_pie": true, "pie": true}

// fifoKinds hold their whole limit as delay under load.
var fifoKinds = map[string]bool{"pfifo": true, "bfifo": true, "pfifo_head_drop": true, "nsspfifo": true, "sfq": true}

// packetSize is the largest packet the qdiscs of t see: an nsstbl/tbf mtu
// on the way up, else the device MTU plus the Ethernet header.
func (c *checker) packetSize(t *tree, n *node) uint64 {
	for p, i := n, 0; p != nil && i < 64; p, i = p.parent, i+1 {
		if m, ok := p.rec.Size("mtu"); ok && m > 0 {
			return m
		}
	}
	if d, ok := c.device(t.dev); ok && d.MTU > 0 {
		return uint64(d.MTU + ethHeader)
	}
	return defaultMTU + ethHeader
}

// limitBytes is a queue's limit in bytes: packets × size, or bytes (bfifo).
func limitBytes(n *node, size uint64) (uint64, string, bool) {
	if n.rec.Kind == "bfifo" {
		b, ok := n.rec.Size("limit")
		return b, fmt.Sprintf("limit %d bytes", b), ok
	}
	p, ok := n.rec.Packets("limit")
	return p * size, fmt.Sprintf("limit %dp × %d B", p, size), ok
}

func (c *checker) sizing(t *tree, wan string) {
	fifos := map[*node][]*node{} // shaper → its FIFO leaves
	var shapers []*node
	for _, n := range t.rootTree() {
		r := n.rec
		size := c.packetSize(t, n)
		rate, shaper := shaperRate(n)
		switch {
		case aqmKinds[r.Kind] && rate > 0:
			lb, how, ok := limitBytes(n, size)
			p, _ := r.Packets("limit")
			if d := transmitTime(lb, rate); ok && d > maxQueueDelay && p > aqmFloor {
				want := max(aqmFloor, int(float64(rate)*0.030/8/float64(size)))
				c.add(Warn, "limit-depth", t.dev+" "+n.name(),
					fmt.Sprintf("Lower the limit to about %d packets (30 ms at the shaped rate, at least %d): a deeper queue lets bloat through before CoDel reacts.", want, aqmFloor),
					fmt.Sprintf("%s %s %s = %s at %s", t.dev, n.name(), how, fmtMS(d), tcstats.FormatRate(rate)))
			}
		case fifoKinds[r.Kind] && rate > 0:
			if _, seen := fifos[shaper]; !seen {
				shapers = append(shapers, shaper)
			}
			fifos[shaper] = append(fifos[shaper], n)
		}
		c.burst(t, n, size)
		if r.Kind == "htb" && r.Type == "class" {
			if q, ok := r.Size("quantum"); ok && q > htbQuantumWarn {
				why := "far above one MTU"
				if q > htbQuantumCap {
					why = fmt.Sprintf("above the kernel's %d cap (it warns \"quantum of class is big\")", htbQuantumCap)
				}
				c.add(Warn, "htb-quantum", t.dev+" "+n.name(),
					fmt.Sprintf("Set quantum to about 1 ms at the class rate, between one MTU (%d) and %d bytes.", size, htbQuantumWarn),
					fmt.Sprintf("%s %s quantum %d bytes, %s", t.dev, n.name(), q, why))
			}
		}
	}
	for _, s := range shapers {
		c.fifoDepth(t, s, fifos[s])
	}
	c.linkSpeed(t, wan)
}

func (c *checker) fifoDepth(t *tree, shaper *node, leaves []*node) {
	rate, _ := shaperRate(shaper)
	var total time.Duration
	var ev []string
	for _, n := range leaves {
		lb, how, ok := limitBytes(n, c.packetSize(t, n))
		if !ok && n.rec.Kind == "sfq" {
			lb, how, ok = 127*c.packetSize(t, n), "default limit 127p", true
		}
		if !ok {
			continue
		}
		d := transmitTime(lb, rate)
		total += d
		ev = append(ev, fmt.Sprintf("%s %s %s = %s at %s", t.dev, n.name(), how, fmtMS(d), tcstats.FormatRate(rate)))
	}
	if total <= maxQueueDelay {
		return
	}
	id := "fifo-depth"
	if len(ev) > 1 {
		id = "multiband-fifo"
		ev = append(ev, fmt.Sprintf("worst case %s of buffering under %s", fmtMS(total), shaper.name()))
	}
	c.add(Warn, id, t.dev+" "+shaper.name(),
		"Replace the FIFOs with one fq_codel (or cake) leaf: a FIFO adds its whole limit as delay under load.", ev...)
}

func (c *checker) burst(t *tree, n *node, size uint64) {
	for _, k := range [][2]string{{"burst", "rate"}, {"cburst", "ceil"}} {
		b, ok := n.rec.Size(k[0])
		rate, rok := n.rec.Rate(k[1])
		if !ok || !rok || rate == 0 {
			continue
		}
		hi := max(uint64(float64(rate)*maxBurstTime.Seconds()/8), 2*size)
		ev := fmt.Sprintf("%s %s %s %d bytes = %s at %s", t.dev, n.name(), k[0], b, transmitTime(b, rate).Round(10*time.Microsecond), tcstats.FormatRate(rate))
		want := fmt.Sprintf("Set %s to about 1 ms at the rate (%d bytes), never below one packet (%d bytes).", k[0], max(rate/8000, size), size)
		switch {
		case b < size:
			c.add(Warn, "burst-small", t.dev+" "+n.name(), want, ev, fmt.Sprintf("below one packet of %d bytes", size))
		case b > hi:
			c.add(Warn, "burst-large", t.dev+" "+n.name(), want, ev, fmt.Sprintf("above %s at rate: the shaper releases a latency spike", maxBurstTime))
		}
	}
}

// linkSpeed flags a shaper faster than the WAN link: the queue then forms
// in the NIC or modem, not in the shaper.
func (c *checker) linkSpeed(t *tree, wan string) {
	d, ok := c.device(wan)
	if !ok || d.SpeedMbit <= 0 {
		return
	}
	rate, at := t.rootRate()
	if rate <= uint64(d.SpeedMbit)*1e6 {
		return
	}
	c.add(Warn, "rate-above-link", t.dev+" "+at.name(),
		"Shape below the real bottleneck (about 95% of the measured line rate); above the link speed the queue stays in the NIC or modem.",
		fmt.Sprintf("%s %s rate %s", t.dev, at.name(), tcstats.FormatRate(rate)),
		fmt.Sprintf("%s link speed %d Mbit/s (/sys/class/net/%s/speed)", wan, d.SpeedMbit, wan))
}

// overhead flags PPP and ATM links shaped without per-packet overhead:
// the shaper then under-counts every packet and the modem queues again.
func (c *checker) overhead(wan string) {
	d, _ := c.device(wan)
	var why string
	switch e := c.expect[wan]; {
	case e != nil && e.Queue.LinkLayer == "atm":
		why = "linklayer atm is configured"
	case d.Type == arphrdPPP:
		why = wan + " is a PPP device (PPPoE or PPPoA)"
	default:
		return
	}
	for _, dev := range append([]string{wan}, c.tree(wan).redirects()...) {
		t := c.tree(dev)
		if t.root == nil || t.root.rec.IsDefault() || c.compensated(t) {
			continue
		}
		c.add(Warn, "no-overhead", dev+" "+t.root.name(),
			"Set the per-packet overhead (e.g. 28 bytes for PPPoE over Ethernet, linklayer atm with 44 on ADSL) so the shaper counts what the line carries.",
			fmt.Sprintf("%s root %s has no overhead or linklayer compensation", dev, t.root.name()), why)
	}
}

const arphrdPPP = 512

func (c *checker) compensated(t *tree) bool {
	r := t.root.rec
	for _, o := range r.Options {
		if strings.HasPrefix(o.Key, "stab_") {
			return true
		}
	}
	switch {
	case tcstats.IsCake(r.Kind):
		o, _ := r.Get("overhead")
		return o != "" && o != "0" || r.Has("atm") || r.Has("ptm")
	case isNSS(r.Kind):
		m, ok := r.Size("mtu")
		d, dok := c.device(t.dev)
		return !ok || !dok || d.MTU == 0 || m > uint64(d.MTU)
	}
	return false
}
