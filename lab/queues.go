package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/tcstats"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// shaperCost is what a shaped scenario's shaper looked like under load:
// its roots, how a cake_mq root's queues shared the packets, and the
// guest's CPU time per shaped Mbit in the bidirectional phase.
type shaperCost struct {
	Roots  map[string]string `json:"roots"` // device -> root qdisc kind after the test
	Queues []queueShare      `json:"queues,omitempty"`
	// CPUMsPerMbit: the vCPUs' busy time (both of them) per Mbit carried
	// both ways in the bidirectional phase; 0 when not measured.
	CPUMsPerMbit float64 `json:"cpu_ms_per_mbit,omitempty"`
}

// queueShare is a cake_mq root's packets per queue, in parent order.
type queueShare struct {
	Dev     string   `json:"dev"`
	Packets []uint64 `json:"packets"`
}

// costOf reads the router's tree after the test (tc -s qdisc show) and the
// bidirectional phase's vCPU load for m.
func costOf(tcOut string, devs []string, m *accept.Measurement) (*shaperCost, error) {
	recs, err := tcstats.Parse([]byte(tcOut))
	if err != nil {
		return nil, err
	}
	s := &tcstats.Snapshot{Records: recs}
	c := &shaperCost{Roots: map[string]string{}}
	for _, dev := range devs {
		root := s.Root(dev)
		if root == nil {
			continue
		}
		c.Roots[dev] = root.Kind
		if root.Kind != "cake_mq" {
			continue
		}
		q := queueShare{Dev: dev}
		for _, r := range s.Of(dev) {
			if r.Type == "qdisc" && r.Kind == "cake" && tcstats.Major(r.Parent) == root.Handle {
				q.Packets = append(q.Packets, r.Stats.Packets)
			}
		}
		c.Queues = append(c.Queues, q)
	}
	if m != nil {
		if p := m.Phase(accept.Bidir); p != nil && p.Noise != nil && p.DownMbps+p.UpMbps > 0 {
			c.CPUMsPerMbit = p.Noise.Busy * vCPUs * 1000 / (p.DownMbps + p.UpMbps)
		}
	}
	return c, nil
}

// vCPUs is the guest's CPU count (vm.Args: -smp 2).
const vCPUs = 2

// costLine is the line under a profile's table about a shaper's cost.
func costLine(c *shaperCost) string {
	var parts []string
	for _, q := range c.Queues {
		var total uint64
		for _, n := range q.Packets {
			total += n
		}
		shares := make([]string, len(q.Packets))
		for i, n := range q.Packets {
			shares[i] = fmt.Sprintf("%.0f", 100*float64(n)/float64(max(total, 1)))
		}
		parts = append(parts, fmt.Sprintf("%s queues %s %% of %d pkt", q.Dev, strings.Join(shares, "/"), total))
	}
	var roots []string
	for dev, kind := range c.Roots {
		roots = append(roots, dev+" "+kind)
	}
	if len(c.Queues) == 0 && len(roots) > 0 {
		slices.Sort(roots)
		parts = append(parts, "roots "+strings.Join(roots, ", "))
	}
	if c.CPUMsPerMbit > 0 {
		parts = append(parts, fmt.Sprintf("guest CPU %.1f ms per shaped Mbit (bidirectional)", c.CPUMsPerMbit))
	}
	return strings.Join(parts, "; ")
}
