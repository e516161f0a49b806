package doctor

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/plan"
)

// bypass compares what the shaper counted with what the device moved over
// the window; totals cannot be compared, because device counters start at
// boot and qdisc counters when the qdisc was created.
func (c *checker) bypass(wan, ifb string) {
	if c.in.Prev == nil {
		return
	}
	now, nok := c.in.Now.Devices[wan]
	prev, pok := c.in.Prev.Devices[wan]
	if !nok || !pok || !now.HasCounters || !prev.HasCounters {
		return
	}
	check := func(dev, dir string, moved uint64) {
		t := c.tree(dev)
		if t.root == nil || isDefault(t.root.rec) || moved < minBypassBytes {
			return
		}
		got := t.root.bytes
		ev := []string{
			fmt.Sprintf("%s %s %d bytes in %s", wan, dir, moved, c.in.Window),
			fmt.Sprintf("%s root %s counted %d bytes (%.1f%%)", dev, t.root.name(), got, 100*float64(got)/float64(moved)),
		}
		if float64(got) >= bypassRatio*float64(moved) {
			c.add(OK, "on-path", dev+" "+t.root.name(), "", ev...)
			return
		}
		c.add(Fail, "bypass", dev+" "+t.root.name(), c.bypassFix(), ev...)
	}
	check(wan, "transmitted", now.TxBytes-min(prev.TxBytes, now.TxBytes))
	if ifb != "" {
		check(ifb, "received", now.RxBytes-min(prev.RxBytes, now.RxBytes))
	}
}

func (c *checker) bypassFix() string {
	var set []string
	if c.in.Offload.Software {
		set = append(set, "flow_offloading")
	}
	if c.in.Offload.Hardware {
		set = append(set, "flow_offloading_hw")
	}
	if len(set) > 0 {
		return "Set " + strings.Join(set, " and ") + " to 0 in /etc/config/firewall: offloaded flows skip the shaper."
	}
	return "Turn off the fast path that skips the qdiscs (flow offloading, FastTrack, NSS ECM for unshaped devices), or shape a device every packet passes."
}

// mismatch compares the kernel's trees with the plan the config produces.
func (c *checker) mismatch(wan, ifb string) {
	e := c.expect[wan]
	if e == nil || e.Plan == nil {
		return
	}
	for _, d := range e.Plan.Dirs {
		dev := d.Device
		var ev []string
		if d.Direction == plan.Ingress && ifb != "" && ifb != dev {
			ev = append(ev, fmt.Sprintf("download redirected to %s, config expects %s", ifb, dev))
			dev = ifb
		}
		t := c.tree(dev)
		if t.root == nil || isDefault(t.root.rec) {
			continue // reported as a missing direction
		}
		ev = append(ev, c.compare(t, d)...)
		if len(ev) > 0 {
			c.add(Warn, "mismatch", fmt.Sprintf("%s %s", dev, d.Direction),
				"Re-apply the config (`sqmkit start`), or change /etc/config/sqm if the kernel holds what you want.", ev...)
		}
	}
}

func (c *checker) compare(t *tree, d *plan.Dir) []string {
	var ev []string
	diff := func(what, kernel, config string) {
		ev = append(ev, fmt.Sprintf("%s: kernel %s, config %s", what, kernel, config))
	}
	if len(d.Tree) > 0 && t.root.rec.Kind != d.Tree[0].Kind {
		diff("root qdisc", t.root.rec.Kind, d.Tree[0].Kind)
		return ev
	}
	if rate, _ := t.rootRate(); d.RateKbit > 0 && rate > 0 && !near(float64(rate), float64(d.RateKbit)*1000, 0.01) {
		diff("rate", fmtRate(rate), fmtRate(uint64(d.RateKbit)*1000))
	}
	var leaf *node
	for _, n := range t.rootTree() {
		if aqmKinds[n.rec.Kind] && n.rec.Type == "qdisc" {
			leaf = n
		}
	}
	if leaf != nil {
		if l, ok := leaf.rec.Packets("limit"); ok && d.Limit > 0 && l != uint64(d.Limit) {
			diff("limit", fmt.Sprintf("%dp", l), fmt.Sprintf("%dp", d.Limit))
		}
		for _, k := range []struct {
			key  string
			want time.Duration
		}{{"target", d.Target}, {"interval", d.Interval}} {
			if got, ok := leaf.rec.Duration(k.key); ok && k.want > 0 && !near(float64(got), float64(k.want), 0.01) {
				diff(k.key, got.String(), k.want.String())
			}
		}
	}
	r := t.root.rec
	switch {
	case r.Kind == "cake":
		if o, ok := r.Get("overhead"); ok && o != fmt.Sprint(d.Overhead) {
			diff("overhead", o, fmt.Sprint(d.Overhead))
		}
	case isNSS(r.Kind):
		if m, ok := r.Size("mtu"); ok && d.MTU > 0 && m != uint64(d.MTU) {
			diff("mtu (MTU + overhead)", fmt.Sprint(m), fmt.Sprint(d.MTU))
		}
	default:
		if o, ok := r.Get("stab_overhead"); ok && o != fmt.Sprint(d.Overhead) {
			diff("overhead", o, fmt.Sprint(d.Overhead))
		}
	}
	return ev
}

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*want
}
