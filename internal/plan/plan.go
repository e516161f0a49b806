// Package plan computes, without touching the kernel, the qdisc trees and the
// exact tc/ip commands that shape one SQM queue. It is a pure function of a
// config.Queue and the linkinfo.Facts of its device.
package plan

import (
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Plan is everything a start of one queue does.
type Plan struct {
	Section string
	Backend config.Backend
	Device  string // the WAN device
	IFB     string // "" when the download is not shaped
	Notes   []string
	Dirs    []*Dir // shaped directions, egress first
	// Clear removes what an earlier configuration left on the directions
	// this plan does not shape (rate 0): as in sqm-scripts, a start implies
	// a stop, so no stale tree survives a change of rates.
	Clear [][]string
}

// Rates are the planned rates, 0 in a direction the plan does not shape.
func (p *Plan) Rates() config.Rates {
	var r config.Rates
	for _, d := range p.Dirs {
		r.Set(d.Direction, d.RateKbit)
	}
	return r
}

// Dir is the plan of one direction. Setup, TC and Teardown are argv lines
// without the program name, exactly as `ip -batch` / `tc -batch` take them.
type Dir struct {
	Direction config.Direction
	Device    string // whose root holds the shaper: the WAN device or the IFB

	RateKbit  int
	Overhead  int
	MTU       int // effective MTU: device MTU + overhead
	MPU       int
	Limit     int           // packets; 0 for cake, which sizes its own memory
	Burst     int           // shaper bytes (htb burst/cburst, nsstbl burst); 0 for cake
	Quantum   int           // htb class quantum (fq_codel backend) in bytes; 0 otherwise
	FQQuantum int           // fq_codel / nssfq_codel quantum in bytes; 0 for cake
	Target    time.Duration // cake: rtt/20, the target cake derives itself
	Interval  time.Duration // cake: the rtt
	Flows     int           // 0 for cake (fixed 1024 queues per tin)
	ECN       bool          // always true for cake, which has no switch
	// Queues is how many queues of Device a cake_mq root spreads over (one
	// cake each); 1 for every other root.
	Queues int

	Setup [][]string // ip: create and raise the IFB (ingress only)
	TC    [][]string // tc batch that builds the tree; the redirect comes last
	// Redirect is the tail of TC that attaches the ingress qdisc and the
	// redirect to the IFB (ingress only): what a re-created WAN device
	// needs when its IFB is still shaped.
	Redirect [][]string
	Teardown [][]string // tc batch that removes what TC adds; each line may fail harmlessly
	Tree     []Node     // qdiscs and classes TC leaves behind, for read-back and doctor

	Notes []string // derivations for this direction, as `#` lines
}

// Node is one qdisc, class or filter that a Dir leaves in the kernel, in
// the live tree's terms (tcstats.Record) so the two compare directly.
type Node struct {
	Dev    string
	Type   string // "qdisc", "class" or "filter"
	Kind   string // e.g. "htb", "fq_codel", "nsstbl", "ingress", "u32"
	Handle string // "1:", "1:1", "ffff:" ("" for filters)
	// Parent is "root" for a root qdisc and for a class attached to its
	// qdisc (as tc prints it), tcstats.Ingress for the ingress qdisc and its
	// filter, else the parent handle, such as "1:" or "1:1".
	Parent string
	// Redirect is the device a filter's redirect action points at.
	Redirect string
}
