package doctor

import (
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Thresholds of the multi-queue checks (docs/design.md, "Multi-queue cake").
const (
	// minSkewPackets: fewer packets under a cake_mq root say nothing about
	// how flows spread over its queues.
	minSkewPackets = 1000
	// skewShare: one queue carrying this share of the packets while the
	// others idle is one CPU doing the work cake_mq was asked to spread.
	skewShare = 0.9
)

// multiqueue judges cake_mq: its queues' shares of the traffic on the WAN
// device and the IFB, and a plain cake where the config asked for cake_mq
// and the plan could have it (TestMultiQueue).
func (c *checker) multiqueue(wan, ifb string) {
	if e := c.expect[wan]; e != nil && e.Plan != nil && e.Queue.UseMQ {
		for _, d := range e.Plan.Dirs {
			dev := d.Device
			if d.Direction == config.Download && ifb != "" {
				dev = ifb
			}
			if root := c.tree(dev).root; d.Tree[0].Kind == "cake_mq" && root != nil && root.rec.Kind == "cake" {
				c.add(Warn, "mq-plain-cake", fmt.Sprintf("%s %s", dev, d.Direction.Side()),
					"Run a kernel and tc that have cake_mq (Linux 7.0 or later, or OpenWrt 25.12; iproute2 7.1 or later) and start again, or set use_mq 0: plain cake shapes on one CPU.",
					fmt.Sprintf("use_mq is set and %s has %d queues, but its root is plain cake", dev, d.Queues))
			}
		}
	}
	for _, dev := range []string{wan, ifb} {
		if dev != "" {
			c.queueShares(dev, dev == ifb)
		}
	}
}

// queueShares reports how a cake_mq root's instances shared the packets,
// and warns when one carried nearly all of them.
func (c *checker) queueShares(dev string, ingress bool) {
	t := c.tree(dev)
	if t.root == nil || t.root.rec.Kind != "cake_mq" {
		return
	}
	var total, top uint64
	var ev []string
	for i, n := range t.root.children {
		total += n.packets
		top = max(top, n.packets)
		ev = append(ev, fmt.Sprintf("queue %d (parent %s): %d pkt", i+1, n.rec.Parent, n.packets))
	}
	if len(t.root.children) < 2 || total < minSkewPackets {
		return
	}
	for i, n := range t.root.children {
		ev[i] += fmt.Sprintf(" (%.0f%%)", 100*float64(n.packets)/float64(total))
	}
	ev = append(ev, fmt.Sprintf("%d pkt %s over %d queues", total, c.span(), len(t.root.children)))
	if float64(top) < skewShare*float64(total) {
		c.add(OK, "mq-queues", dev+" cake_mq", "", ev...)
		return
	}
	fix := fmt.Sprintf("Spread the flows over %s's TX queues (XPS: /sys/class/net/%s/queues/tx-*/xps_cpus, or the NIC's RSS), or set use_mq 0: one queue does all the work on one CPU, and cake_mq only splits the rate.", dev, dev)
	if ingress {
		fix = "A redirected packet keeps its WAN RX queue as its IFB queue: spread the WAN's receive over its RX queues (RSS, `ethtool -X`; RPS does not move the RX queue), or set use_mq 0."
	}
	c.add(Warn, "mq-skew", dev+" cake_mq", fix, append(ev, fmt.Sprintf("one queue carried %.0f%% of the packets", 100*float64(top)/float64(total)))...)
}

// mqInstance reports a cake instance the kernel attached under a cake_mq
// root: its traffic is judged as a share (queueShares), never as dead.
func mqInstance(n *node) bool {
	return n.parent != nil && n.parent.rec.Kind == "cake_mq" && strings.HasPrefix(n.rec.Kind, "cake")
}
