package doctor

import (
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// tree is the qdiscs and classes of one device, linked.
type tree struct {
	dev   string
	nodes []*node
	index map[string]*node // type + " " + handle -> the first such node
	// underRoot caches rootTree, which every check walks.
	underRoot []*node
	root      *node // the root qdisc, nil when none
	ingress   *node // the ingress (or clsact) qdisc
	filters   []*tcstats.Record
}

type node struct {
	pos      int // in tree.nodes: tc's order
	rec      *tcstats.Record
	parent   *node
	children []*node
	packets  uint64 // over the window, or the total
	bytes    uint64
	dropped  uint64
}

// flowKinds print one class per active flow (fq_codel, cake, sfq, ...) or
// a pseudo class without counters (tbf); those are never judged as dead.
var flowKinds = map[string]bool{
	"fq_codel": true, "cake": true, "sfq": true, "fq": true, "fq_pie": true,
	"nssfq_codel": true, "mq": true, "mqprio": true, "tbf": true,
}

func (n *node) name() string { return n.rec.ID() }

func buildTrees(now, prev *Sample) map[string]*tree {
	prevStats := map[string]tcstats.Stats{}
	if prev != nil {
		for _, r := range prev.Records {
			if r.HasStats {
				prevStats[key(&r)] = r.Stats
			}
		}
	}
	trees := map[string]*tree{}
	get := func(dev string) *tree {
		t := trees[dev]
		if t == nil {
			t = &tree{dev: dev, index: map[string]*node{}}
			trees[dev] = t
		}
		return t
	}
	for i := range now.Records {
		r := &now.Records[i]
		t := get(r.Dev)
		if r.Type == "filter" {
			t.filters = append(t.filters, r)
			continue
		}
		n := &node{pos: len(t.nodes), rec: r, packets: r.Stats.Packets, bytes: r.Stats.Bytes, dropped: r.Stats.Dropped}
		if p, ok := prevStats[key(r)]; ok && prev != nil && p.Packets <= r.Stats.Packets && p.Bytes <= r.Stats.Bytes {
			// counters that went down belong to a re-created qdisc: keep the totals
			n.packets -= p.Packets
			n.bytes -= p.Bytes
			n.dropped -= min(p.Dropped, n.dropped)
		}
		t.nodes = append(t.nodes, n)
		if k := r.Type + " " + r.Handle; t.index[k] == nil {
			t.index[k] = n
		}
		switch {
		case r.Type == "qdisc" && r.Parent == "root":
			t.root = n
		case r.Type == "qdisc" && (r.Parent == "ingress" || r.Handle == "ffff:" && (r.Kind == "ingress" || r.Kind == "clsact")):
			t.ingress = n
		}
	}
	for _, t := range trees {
		t.link()
	}
	return trees
}

func key(r *tcstats.Record) string {
	return r.Dev + " " + r.Type + " " + r.Kind + " " + r.Handle + " " + r.Parent
}

func (t *tree) find(typ, handle string) *node { return t.index[typ+" "+handle] }

// link sets each node's parent: a qdisc hangs off the class its parent
// names, or off the qdisc of that major number when the class is not
// listed (nssprio bands, class output not given); a root class hangs off
// its own qdisc.
func (t *tree) link() {
	for _, n := range t.nodes {
		r := n.rec
		var p *node
		switch {
		case r.Parent == "root" && r.Type == "class":
			p = t.find("qdisc", tcstats.Major(r.Handle))
		case r.Parent == "root" || r.Parent == "ingress" || r.Parent == "":
		case strings.HasSuffix(r.Parent, ":"):
			p = t.find("qdisc", r.Parent)
		default:
			if p = t.find("class", r.Parent); p == nil {
				p = t.find("qdisc", tcstats.Major(r.Parent))
			}
		}
		if p != nil && p != n {
			n.parent = p
			p.children = append(p.children, n)
		}
	}
}

// under reports whether n is in the subtree of top.
func (n *node) under(top *node) bool {
	seen := 0
	for p := n; p != nil && seen < 64; p = p.parent {
		if p == top {
			return true
		}
		seen++
	}
	return false
}

// rootTree lists the nodes under the root qdisc, the root first.
func (t *tree) rootTree() []*node {
	if t.root == nil {
		return nil
	}
	if t.underRoot == nil {
		for _, n := range t.nodes {
			if n.under(t.root) {
				t.underRoot = append(t.underRoot, n)
			}
		}
	}
	return t.underRoot
}

// shaperRate is the rate n is drained at: its own rate or bandwidth, or
// the nearest ancestor's, in bit/s; 0 when nothing on the way has one.
func shaperRate(n *node) (uint64, *node) {
	for p, i := n, 0; p != nil && i < 64; p, i = p.parent, i+1 {
		for _, k := range []string{"rate", "bandwidth"} {
			if r, ok := p.rec.Rate(k); ok && r > 0 {
				return r, p
			}
		}
	}
	return 0, nil
}

// rootRate is the rate of the tree's shaper: the root's own rate, or the
// highest rate among its direct classes (htb puts rates on classes).
func (t *tree) rootRate() (uint64, *node) {
	if t.root == nil {
		return 0, nil
	}
	if r, n := shaperRate(t.root); r > 0 {
		return r, n
	}
	var best uint64
	var at *node
	for _, c := range t.root.children {
		if r, ok := c.rec.Rate("rate"); ok && r > best {
			best, at = r, c
		}
	}
	return best, at
}

// redirects lists the devices the ingress filters redirect to.
func (t *tree) redirects() []string {
	var out []string
	for _, f := range t.filters {
		if f.Parent != tcstats.Ingress {
			continue
		}
		for _, a := range f.Actions {
			if a.Redirect != "" && !slices.Contains(out, a.Redirect) {
				out = append(out, a.Redirect)
			}
		}
	}
	return out
}
