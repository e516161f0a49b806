package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/tcstats"
)

type checker struct {
	in       Input
	trees    map[string]*tree
	wans     []string
	expect   map[string]*Expect
	findings []Finding
}

// start names how the reader re-applies the config: the command, or on
// LuCI's pages the SQM page's Save & Apply.
func (c *checker) start() string {
	if c.in.Web {
		return "Save & Apply on Network → SQM QoS"
	}
	return "`sqmkit start`"
}

func newChecker(in Input) *checker {
	c := &checker{in: in, trees: buildTrees(&in.Now, in.Prev), expect: map[string]*Expect{}}
	for i := range in.Expect {
		c.expect[in.Expect[i].Queue.Interface] = &in.Expect[i]
	}
	switch {
	case len(in.Devices) > 0:
		c.wans = slices.Clone(in.Devices)
	case len(in.Expect) > 0:
		for _, e := range in.Expect {
			c.wans = append(c.wans, e.Queue.Interface)
		}
	default:
		targets := map[string]bool{}
		for _, t := range c.trees {
			for _, d := range t.redirects() {
				targets[d] = true
			}
		}
		for dev, t := range c.trees {
			if !targets[dev] && (t.root != nil && !t.root.rec.IsDefault() || len(t.redirects()) > 0) {
				c.wans = append(c.wans, dev)
			}
		}
		sort.Strings(c.wans)
	}
	return c
}

func (c *checker) add(s Severity, id, subject, fix string, evidence ...string) {
	c.findings = append(c.findings, Finding{Severity: s, ID: id, Subject: subject, Evidence: evidence, Fix: fix})
}

func (c *checker) tree(dev string) *tree {
	if t := c.trees[dev]; t != nil {
		return t
	}
	return &tree{dev: dev}
}

func (c *checker) device(dev string) (Device, bool) {
	d, ok := c.in.Now.Devices[dev]
	return d, ok && d.Exists
}

// span describes the counting basis for evidence lines.
func (c *checker) span() string {
	if c.in.Prev != nil {
		return "in " + c.in.Window.String()
	}
	return "total"
}

func (c *checker) run() {
	for _, wan := range c.wans {
		ifb := c.directions(wan)
		for _, dev := range []string{wan, ifb} {
			if dev == "" {
				continue
			}
			t := c.tree(dev)
			c.dead(t)
			c.oneBand(t)
			c.sizing(t, wan)
			c.nss(t)
			c.sfq(t)
			c.htbDirect(t)
			c.subclassCeil(t)
		}
		c.filters(wan)
		c.bypass(wan, ifb)
		c.overhead(wan)
		c.mismatch(wan, ifb)
		c.multiqueue(wan, ifb)
		c.cpu(wan)
	}
	if c.in.Offload.Hardware {
		c.add(Warn, "flow-offload", "firewall defaults",
			"Set flow_offloading_hw to 0 in /etc/config/firewall: hardware-offloaded flows never reach the shaper's qdiscs.",
			"/etc/config/firewall: config defaults: option flow_offloading_hw '1'")
	}
}

func (c *checker) nodeLine(n *node) string {
	return fmt.Sprintf("%s %s parent %s, %d pkt, %d bytes %s", n.rec.Dev, n.name(), n.rec.Parent, n.packets, n.bytes, c.span())
}

func isNSS(kind string) bool { return strings.HasPrefix(kind, "nss") }

// directions checks that the WAN device has an egress shaper and, when a
// download is configured or a redirect exists, a working ingress path.
// It returns the IFB that shapes the download, "" when none.
func (c *checker) directions(wan string) string {
	t := c.tree(wan)
	e := c.expect[wan]
	if d, ok := c.in.Now.Devices[wan]; ok && !d.Exists {
		c.add(Fail, "no-device", wan, "Name an existing WAN device (interface option in /etc/config/sqm or the IFACE argument).",
			"/sys/class/net/"+wan+" does not exist")
		return ""
	}
	upload, download := -1, -1 // unknown without a config
	if e != nil {
		upload, download = e.Queue.Upload, e.Queue.Download
	}
	switch {
	case t.root != nil && !t.root.rec.IsDefault():
		rate, _ := t.rootRate()
		c.add(OK, "egress", wan, "", fmt.Sprintf("root %s shapes egress at %s (%d pkt %s)", t.root.name(), tcstats.FormatRate(rate), t.root.packets, c.span()))
	case upload != 0:
		sev, why := Warn, "no upload rate is known"
		if upload > 0 {
			sev, why = Fail, fmt.Sprintf("upload %d kbit/s is configured", upload)
		}
		ev := "no root qdisc on " + wan
		if t.root != nil {
			ev = fmt.Sprintf("root is the kernel default %s", t.root.name())
		}
		c.add(sev, "no-egress-shaper", wan, "Start the shaper ("+c.start()+"); nothing limits the upload, so the queue forms in the modem.", ev, why)
	}

	targets := t.redirects()
	if t.ingress != nil && len(targets) == 0 && c.in.Now.NoFilters {
		// Not a fault of the router, so ok: the report still says what it
		// could not judge and how to include it.
		c.add(OK, "ingress-unjudged", wan, "",
			"ingress qdisc "+t.ingress.rec.Handle+" on "+wan+", but no filter output was given",
			"add --tc-filter FILE with `tc -s filter show dev "+wan+" ingress` to judge the download redirect")
		return ""
	}
	if t.ingress == nil || len(targets) == 0 {
		if download > 0 {
			ev := "no ingress qdisc on " + wan
			if t.ingress != nil {
				ev = "ingress qdisc " + t.ingress.rec.Handle + " has no filter redirecting to an IFB"
			}
			c.add(Fail, "no-ingress-shaper", wan, "Start the shaper ("+c.start()+"); the download is not redirected to an IFB, so it is not shaped.",
				ev, fmt.Sprintf("download %d kbit/s is configured", download))
		}
		return ""
	}
	ifb := targets[0]
	if e != nil && e.Plan != nil && e.Plan.IFB != "" && !slices.Contains(targets, e.Plan.IFB) {
		ifb = e.Plan.IFB
	}
	ev := []string{fmt.Sprintf("ingress qdisc on %s redirects to %s (%d pkt, %d dropped %s)", wan, strings.Join(targets, ", "), t.ingress.packets, t.ingress.dropped, c.span())}
	d, known := c.in.Now.Devices[ifb]
	switch {
	case known && !d.Exists:
		c.add(Fail, "ifb-missing", ifb, "Create and raise the IFB ("+c.start()+" does), or remove the redirect: every download packet is dropped.",
			append(ev, "/sys/class/net/"+ifb+" does not exist")...)
		return ""
	case known && d.OperState == "down":
		c.add(Fail, "ifb-down", ifb, "Bring the IFB up (`ip link set "+ifb+" up`): a redirect to a down IFB drops every download packet.",
			append(ev, "operstate of "+ifb+" is down")...)
		return ""
	}
	it := c.tree(ifb)
	switch {
	case it.root != nil && !it.root.rec.IsDefault():
		rate, _ := it.rootRate()
		c.add(OK, "ingress", wan, "", append(ev, fmt.Sprintf("%s root %s shapes ingress at %s (%d pkt %s)", ifb, it.root.name(), tcstats.FormatRate(rate), it.root.packets, c.span()))...)
		return ifb
	case it.root != nil || c.in.Now.Complete || known:
		c.add(Fail, "ifb-no-shaper", ifb, "Add the IFB's shaper ("+c.start()+"): the download is redirected but nothing shapes it.",
			append(ev, ifb+" has no shaping root qdisc")...)
	default:
		c.add(Warn, "ifb-unknown", ifb, "Include the IFB: paste `tc -s qdisc show` without `dev` so its shaper can be judged.",
			append(ev, "no qdisc of "+ifb+" in the input")...)
	}
	return ""
}

// dead flags qdiscs and classes that carried nothing while their tree's
// root carried traffic.
func (c *checker) dead(t *tree) {
	nodes := t.rootTree()
	if len(nodes) == 0 || t.root.packets < minPackets {
		return
	}
	for _, n := range nodes[1:] {
		r := n.rec
		if !r.HasStats || n.packets > 0 || r.Type == "class" && flowKinds[r.Kind] || mqInstance(n) {
			continue
		}
		fix := "Remove it, or fix the filter or default class that should feed it."
		if isNSS(r.Kind) {
			fix = "Remove it and use the flat NSS tree (nsstbl → nssfq_codel): NSS ECM accelerates flows after their first packet, so tc classes never see traffic."
		}
		c.add(Warn, "dead-"+r.Type, t.dev+" "+n.name(), fix,
			c.nodeLine(n), fmt.Sprintf("root %s carried %d pkt %s", t.root.name(), t.root.packets, c.span()))
	}
}

// classifiers spread traffic over bands; when one band gets everything the
// classifier and the other bands are dead weight.
var classifiers = map[string]bool{"prio": true, "nssprio": true, "ets": true, "drr": true, "qfq": true, "htb": true, "hfsc": true, "nsswrr": true, "nsswfq": true}

func (c *checker) oneBand(t *tree) {
	for _, n := range t.rootTree() {
		if !classifiers[n.rec.Kind] || n.packets < minPackets {
			continue
		}
		var live, bands []*node
		for _, ch := range n.children {
			if !ch.rec.HasStats {
				continue
			}
			bands = append(bands, ch)
			if ch.packets > 0 {
				live = append(live, ch)
			}
		}
		if len(bands) < 2 || len(live) != 1 {
			continue
		}
		// n and the idle qdiscs below it, outside the live band's subtree,
		// in tc's order
		idle := []*node{n}
		var walk func(*node)
		walk = func(m *node) {
			for _, ch := range m.children {
				if ch == live[0] {
					continue
				}
				if ch.packets == 0 && ch.rec.Type == "qdisc" {
					idle = append(idle, ch)
				}
				walk(ch)
			}
		}
		walk(n)
		slices.SortFunc(idle, func(a, b *node) int { return a.pos - b.pos })
		var removable []string
		for _, m := range idle {
			removable = append(removable, m.rec.Handle)
		}
		ev := []string{
			fmt.Sprintf("%s %s carried %d pkt %s, all of it to %s (%d pkt)", t.dev, n.name(), n.packets, c.span(), live[0].name(), live[0].packets),
		}
		for _, b := range bands {
			if b != live[0] {
				ev = append(ev, c.nodeLine(b))
			}
		}
		ev = append(ev, "removable qdiscs: "+strings.Join(removable, " "))
		fix := "Remove the classifier and its unused bands; attach the live leaf directly to the shaper."
		if isNSS(n.rec.Kind) {
			fix = "Replace the tree with the flat NSS tree (nsstbl root → one nssfq_codel, set_default; " + c.start() + " with backend nss): qdiscs " + strings.Join(removable, " ") + " can go."
		}
		c.add(Warn, "one-band", t.dev+" "+n.name(), fix, ev...)
	}
}

// nss flags NSS qdiscs that are not offloaded and ECN that the firmware
// accepts but never applies.
func (c *checker) nss(t *tree) {
	for _, n := range t.rootTree() {
		r := n.rec
		if !isNSS(r.Kind) || r.Type != "qdisc" {
			continue
		}
		if v, ok := r.Get("accel_mode"); ok && v != "0" {
			c.add(Warn, "nss-accel-mode", t.dev+" "+n.name(), "Set accel_mode 0 on every NSS qdisc so the NSS firmware shapes the traffic.",
				fmt.Sprintf("%s %s accel_mode %s", t.dev, n.name(), v))
		}
		if r.Kind != "nssfq_codel" || !r.Has("ecn") {
			continue
		}
		marks, _ := r.CounterValue("ecn_mark")
		drops := n.dropped
		if do, ok := r.CounterValue("drop_overlimit"); ok && c.in.Prev == nil {
			drops = max(drops, do)
		}
		if marks == 0 && drops > 0 {
			c.add(Warn, "nss-ecn-ignored", t.dev+" "+n.name(),
				"Expect drops, not marks: the NSS firmware accepts ecn but never marks, so set NOECN to say what really happens.",
				fmt.Sprintf("%s %s ecn requested, ecn_mark 0, %d drops %s", t.dev, n.name(), drops, c.span()))
		}
	}
}

// htbDirect flags an htb root whose default class does not exist: those
// packets go out directly, unshaped, and the counters say so.
func (c *checker) htbDirect(t *tree) {
	r := t.root
	if r == nil || r.rec.Kind != "htb" || r.rec.Parent != "root" {
		return
	}
	direct, ok := r.rec.Packets("direct_packets_stat")
	if !ok || r.rec.Stats.Packets < minPackets || float64(direct) < 0.1*float64(r.rec.Stats.Packets) {
		return
	}
	def, _ := r.rec.Get("default")
	c.add(Warn, "htb-direct", t.dev+" "+r.name(),
		"Point htb's default at an existing leaf class (e.g. `default 1` with class 1:1): unclassified packets skip the shaper.",
		fmt.Sprintf("%s %s default %s: %d of %d pkt went out directly (direct_packets_stat), unshaped", t.dev, r.name(), def, direct, r.rec.Stats.Packets))
}

// subclassCeil flags htb classes capped below what their parent class can
// pass (the wondershaper 90%/80% sub-classes, whose ceil defaults to their
// rate): traffic in such a class alone never gets the rest of the link.
func (c *checker) subclassCeil(t *tree) {
	for _, n := range t.rootTree() {
		p := n.parent
		if n.rec.Kind != "htb" || n.rec.Type != "class" || p == nil || p.rec.Kind != "htb" || p.rec.Type != "class" {
			continue
		}
		ceil, ok := htbCeil(n)
		pceil, pok := htbCeil(p)
		if !ok || !pok || float64(ceil) >= 0.95*float64(pceil) {
			continue
		}
		c.add(Warn, "subclass-ceil", t.dev+" "+n.name(),
			fmt.Sprintf("Set the ceil of %s to its parent's %s (htb lends what other classes leave unused), or use one class with an fq_codel leaf.", n.name(), tcstats.FormatRate(pceil)),
			fmt.Sprintf("%s %s ceil %s = %d%% of parent %s %s: alone, it leaves %d%% of the link unused",
				t.dev, n.name(), tcstats.FormatRate(ceil), 100*ceil/pceil, p.name(), tcstats.FormatRate(pceil), 100-100*ceil/pceil))
	}
}

// htbCeil is what an htb class may send at most: its ceil, else its rate.
func htbCeil(n *node) (uint64, bool) {
	if v, ok := n.rec.Rate("ceil"); ok && v > 0 {
		return v, true
	}
	v, ok := n.rec.Rate("rate")
	return v, ok && v > 0
}

// sfq flags sfq with perturb: rehashing reorders the packets of live TCP flows.
func (c *checker) sfq(t *tree) {
	for _, n := range t.rootTree() {
		if n.rec.Kind != "sfq" {
			continue
		}
		if p, ok := n.rec.Duration("perturb"); ok && p > 0 {
			c.add(Warn, "sfq-perturb", t.dev+" "+n.name(),
				"Replace sfq with fq_codel or cake: perturb rehashes the flows every few seconds and reorders TCP.",
				fmt.Sprintf("%s %s perturb %s", t.dev, n.name(), p))
		}
	}
}

func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// transmitTime is how long bytes take at rate bit/s.
func transmitTime(bytes, rate uint64) time.Duration {
	if rate == 0 {
		return 0
	}
	return time.Duration(float64(bytes) * 8 / float64(rate) * float64(time.Second))
}

// ruleText is a filter's header and selectors on one line, for evidence.
func ruleText(r *tcstats.Record) string {
	var parts []string
	for _, l := range r.Lines {
		l = strings.TrimSpace(l)
		if len(parts) > 0 && !strings.HasPrefix(l, "match ") {
			break
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}
