// Package drift compares a plan with the live tree: its shape (every planned
// qdisc, class and redirect present, nothing else on the queue's devices) and
// the values that decide how the shaper behaves (rate, limit, target,
// interval, overhead, quantum). `sqmkit status`, the doctor, a hotplug start
// and a rate change all ask this one comparison, so they never disagree
// about whether a queue is shaped as planned.
package drift

import (
	"fmt"
	"math"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Kind says what a Diff is about.
type Kind int

const (
	Missing Kind = iota // a planned node the kernel lacks
	Extra               // a node on the queue's devices the plan does not have
	Value               // a planned value the kernel holds differently
)

// Diff is one difference between the plan and the kernel.
type Diff struct {
	Direction config.Direction
	Kind      Kind
	Node      plan.Node // Missing and Extra: the node
	// Value: what differs ("rate", "limit", ...) and both sides, printed.
	What, Kernel, Config string
}

func (d Diff) String() string {
	n := d.Node
	at := fmt.Sprintf("%s %s %s on %s (parent %s)", n.Type, n.Kind, n.Handle, n.Dev, n.Parent)
	if n.Redirect != "" {
		at += " redirecting to " + n.Redirect
	}
	switch d.Kind {
	case Missing:
		return "missing: " + at
	case Extra:
		return "not planned: " + at
	}
	return fmt.Sprintf("%s: kernel %s, config %s", d.What, d.Kernel, d.Config)
}

// tolerance covers tc's rounding when it prints rates and times back.
const tolerance = 0.01

// Compare lists every difference between p and the kernel state s, egress
// first. An empty list means the queue is shaped exactly as planned.
func Compare(p *plan.Plan, s *tcstats.Snapshot) []Diff {
	var out []Diff
	for _, d := range p.Dirs {
		out = append(out, Dir(p, d, s)...)
	}
	out = append(out, extras(p, s)...)
	return out
}

// Dir lists the differences of one planned direction: missing nodes and
// values. Nodes the plan does not know are reported by Compare only, since
// they belong to no planned direction for certain.
func Dir(p *plan.Plan, d *plan.Dir, s *tcstats.Snapshot) []Diff {
	var out []Diff
	live := nodes(s, d.Device)
	if d.Direction == config.Download {
		live = append(live, nodes(s, p.Device)...)
	}
	for _, n := range d.Tree {
		if skipped(n, s) {
			continue
		}
		if !contains(live, n) {
			out = append(out, Diff{Direction: d.Direction, Kind: Missing, Node: n})
		}
	}
	return append(out, values(d, s)...)
}

// skipped reports a node the snapshot cannot judge: pasted output without
// its filter or class part.
func skipped(n plan.Node, s *tcstats.Snapshot) bool {
	return n.Type == "filter" && s.NoFilters || n.Type == "class" && s.NoClasses
}

// extras lists the live nodes on the queue's devices that no direction of
// p plans, attributed to the direction whose hook they sit on.
func extras(p *plan.Plan, s *tcstats.Snapshot) []Diff {
	var planned []plan.Node
	for _, d := range p.Dirs {
		planned = append(planned, d.Tree...)
	}
	var out []Diff
	for _, dev := range []string{p.Device, p.IFB} {
		if dev == "" {
			continue
		}
		for _, n := range nodes(s, dev) {
			if contains(planned, n) {
				continue
			}
			dir := config.Upload
			if dev == p.IFB || n.Parent == tcstats.Ingress {
				dir = config.Download
			}
			out = append(out, Diff{Direction: dir, Kind: Extra, Node: n})
		}
	}
	return out
}

func contains(ns []plan.Node, n plan.Node) bool {
	for _, m := range ns {
		if m == n {
			return true
		}
	}
	return false
}

// nodes turns dev's records into plan nodes: configured qdiscs, classes of
// classful qdiscs (flow queues and tbf print classes that are no
// configuration), and filters, whose u32 hash-table entries of one pref are
// merged into one node carrying the redirect target.
func nodes(s *tcstats.Snapshot, dev string) []plan.Node {
	var out []plan.Node
	filter := map[string]int{} // parent/kind/pref -> index in out
	for _, r := range s.Of(dev) {
		switch {
		case r.Type == "qdisc" && !r.IsDefault():
			out = append(out, plan.Node{Dev: dev, Type: "qdisc", Kind: r.Kind, Handle: r.Handle, Parent: r.Parent})
		case r.Type == "class" && tcstats.Classful(r.Kind):
			out = append(out, plan.Node{Dev: dev, Type: "class", Kind: r.Kind, Handle: r.Handle, Parent: r.Parent})
		case r.Type == "filter":
			pref, _ := r.Get("pref")
			key := r.Parent + "/" + r.Kind + "/" + pref
			i, ok := filter[key]
			if !ok {
				i = len(out)
				filter[key] = i
				out = append(out, plan.Node{Dev: dev, Type: "filter", Kind: r.Kind, Parent: r.Parent})
			}
			for _, a := range r.Actions {
				if a.Redirect != "" && out[i].Redirect == "" {
					out[i].Redirect = a.Redirect
				}
			}
		}
	}
	return out
}

// values compares what decides the shaper's behaviour, when the root is
// the planned kind (otherwise the values of another tree mean nothing).
func values(d *plan.Dir, s *tcstats.Snapshot) []Diff {
	root := s.Root(d.Device)
	if root == nil || root.IsDefault() || len(d.Tree) == 0 {
		return nil
	}
	var out []Diff
	diff := func(what, kernel, config string) {
		out = append(out, Diff{Direction: d.Direction, Kind: Value, What: what, Kernel: kernel, Config: config})
	}
	if want := d.Tree[0].Kind; root.Kind != want {
		diff("root qdisc", root.Kind, want)
		return out
	}
	if got, ok := Rate(d, s); ok && !near(float64(got), float64(d.RateKbit)) {
		diff("rate", tcstats.FormatRate(uint64(got)*1000), tcstats.FormatRate(uint64(d.RateKbit)*1000))
	}
	if class := s.Find(d.Device, "class", "1:1"); class != nil && root.Kind == "htb" && d.Quantum > 0 {
		if q, ok := class.Size("quantum"); ok && q != uint64(d.Quantum) {
			diff("htb quantum", fmt.Sprint(q), fmt.Sprint(d.Quantum))
		}
	}
	if leaf := leafOf(d, s); leaf != nil {
		if l, ok := leaf.Packets("limit"); ok && d.Limit > 0 && l != uint64(d.Limit) {
			diff("limit", fmt.Sprintf("%dp", l), fmt.Sprintf("%dp", d.Limit))
		}
		times(leaf, "target", d.Target, diff)
		times(leaf, "interval", d.Interval, diff)
	}
	switch {
	case tcstats.IsCake(root.Kind):
		if o, ok := root.Get("overhead"); ok && o != fmt.Sprint(d.Overhead) {
			diff("overhead", o, fmt.Sprint(d.Overhead))
		}
		times(root, "rtt", d.Interval, diff)
	case root.Kind == "nsstbl" || root.Kind == "tbf":
		if m, ok := root.Size("mtu"); ok && d.MTU > 0 && m != uint64(d.MTU) {
			diff("mtu (MTU + overhead)", fmt.Sprint(m), fmt.Sprint(d.MTU))
		}
	default:
		if o, ok := root.Get("stab_overhead"); ok && o != fmt.Sprint(d.Overhead) {
			diff("overhead", o, fmt.Sprint(d.Overhead))
		}
	}
	return out
}

// leafOf is the planned AQM leaf (handle 10:) as the kernel holds it.
func leafOf(d *plan.Dir, s *tcstats.Snapshot) *tcstats.Record {
	for _, n := range d.Tree {
		if n.Type == "qdisc" && n.Parent != "root" && n.Parent != tcstats.Ingress {
			if r := s.Find(d.Device, "qdisc", n.Handle); r != nil && r.Kind == n.Kind {
				return r
			}
		}
	}
	return nil
}

func times(r *tcstats.Record, key string, want time.Duration, diff func(what, kernel, config string)) {
	if got, ok := r.Duration(key); ok && want > 0 && !near(float64(got), float64(want)) {
		diff(key, got.String(), want.String())
	}
}

func near(got, want float64) bool { return math.Abs(got-want) <= tolerance*want }

// Rate is the rate the kernel shapes direction d at, read where the plan
// puts it (cake's bandwidth, htb's class 1:1, nsstbl's rate), in kbit/s;
// false when d's root is not there or not of the planned kind.
func Rate(d *plan.Dir, s *tcstats.Snapshot) (int, bool) {
	root := s.Root(d.Device)
	if root == nil || len(d.Tree) == 0 || root.Kind != d.Tree[0].Kind {
		return 0, false
	}
	at, key := root, "rate"
	switch {
	case tcstats.IsCake(root.Kind):
		key = "bandwidth"
	case root.Kind == "htb":
		at = s.Find(d.Device, "class", "1:1")
	}
	if at == nil {
		return 0, false
	}
	bps, ok := at.Rate(key)
	if !ok {
		return 0, false
	}
	return int((bps + 500) / 1000), true
}
