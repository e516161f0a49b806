package doctor

import (
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
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
		if t.root == nil || t.root.rec.IsDefault() || moved < minBypassBytes {
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

// mismatch reports where the kernel's trees differ from the plan the
// config produces, with the comparison `sqmkit status` uses (drift), for
// each direction whose shaper is in place (a missing one has its own
// finding).
func (c *checker) mismatch(wan, ifb string) {
	e := c.expect[wan]
	if e == nil || e.Plan == nil {
		return
	}
	for _, d := range e.Plan.Dirs {
		dev := d.Device
		var ev []string
		if d.Direction == config.Download && ifb != "" && ifb != dev {
			ev = append(ev, fmt.Sprintf("download redirected to %s, config expects %s", ifb, dev))
			dev = ifb
		}
		if !c.in.Now.Shaped(dev) {
			continue // reported as a missing direction
		}
		if r := c.in.Now.Root(dev); d.Tree[0].Kind == "cake_mq" && r.Kind == "cake" {
			continue // reported as mq-plain-cake
		}
		for _, df := range drift.Dir(e.Plan, d, &c.in.Now.Snapshot) {
			ev = append(ev, df.String())
		}
		if len(ev) > 0 {
			c.add(Warn, "mismatch", fmt.Sprintf("%s %s", dev, d.Direction.Side()),
				"Re-apply the config ("+c.start()+"), or change /etc/config/sqm if the kernel holds what you want.", ev...)
		}
	}
}
