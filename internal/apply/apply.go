// Package apply starts, stops and inspects SQM queues on the live kernel.
// Every change goes through whole tc/ip batches (internal/tc), so a warm start
// costs at most four processes, and each direction ends either fully shaped
// or fully clean: a download redirect never points at an unshaped IFB.
package apply

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// Target is one queue to act on and the facts about its device.
type Target struct {
	Queue config.Queue
	Facts linkinfo.Facts
}

// Options configure Start, Stop and Status.
type Options struct {
	Runner *tc.Runner // required
	Prober *tc.Prober // nil skips probing; batches then rely on rollback alone
	// Build plans a queue; nil means plan.Build. Start calls it again with
	// ECN off when tc refuses the ecn keyword.
	Build   func(config.Queue, linkinfo.Facts) (*plan.Plan, error)
	Hotplug bool      // started by an interface hotplug event (spec §5 guard)
	DryRun  io.Writer // non-nil: write what would run there and touch nothing
	Log     func(string)
}

// State is the outcome for one queue.
type State string

const (
	Started State = "started" // every shaped direction applied
	Partial State = "partial" // one direction applied, the other failed
	Failed  State = "failed"
	Waiting State = "waiting" // device has no address yet; hotplug will start it
	Skipped State = "skipped" // hotplug guard: the IFB is already shaped
	Stopped State = "stopped"
	DryRun  State = "dry-run"
)

// Result reports one queue.
type Result struct {
	Section string
	Device  string
	Plan    *plan.Plan // nil when the queue could not be planned
	State   State
	Err     error       // why the whole queue failed, was skipped or waits
	Dirs    []DirResult // one per shaped direction, egress first
}

// DirResult reports one direction.
type DirResult struct {
	Direction plan.Direction
	Device    string
	Err       error // nil: shaped as planned; otherwise see NotStarted
	// NotStarted: Err came from validation and the direction was not
	// touched (it keeps its previous state); otherwise a failed direction
	// was rolled back to no qdisc.
	NotStarted bool
	Warnings   []string // e.g. ECN dropped because tc refused it
}

// Failed reports whether the queue or any of its directions failed.
func (r Result) Failed() bool {
	if r.State == Failed {
		return true
	}
	for _, d := range r.Dirs {
		if d.Err != nil {
			return true
		}
	}
	return false
}

// needsAddress lists the protocols whose device only becomes usable once
// the link is up and addressed; until then a start waits for hotplug. The
// value is the prefix OpenWrt gives the protocol's device (pppoe-wan,
// ds-wan for DS-Lite, map-wan).
var needsAddress = map[string]string{"pppoe": "pppoe-", "dslite": "ds-", "map": "map-"}

func (o *Options) log(format string, a ...any) {
	if o.Log != nil {
		o.Log(fmt.Sprintf(format, a...))
	}
}

func (o *Options) build(q config.Queue, f linkinfo.Facts) (*plan.Plan, error) {
	if o.Build != nil {
		return o.Build(q, f)
	}
	return plan.Build(q, f)
}

// Start applies every target. Per queue it validates and probes first, then
// tears down what a previous start left (one tc -force batch), raises the IFB
// if needed (one ip batch), and applies egress and ingress with one tc batch
// each. A failed direction is torn down again and reported; the other one
// still applies.
func Start(ts []Target, o Options) []Result {
	rs := make([]Result, len(ts))
	var slots []slot
	for i, t := range ts {
		r := &rs[i]
		r.Section, r.Device = t.Queue.Section, t.Queue.Interface
		if !o.validate(t, r) {
			continue
		}
		for j, d := range r.Plan.Dirs {
			r.Dirs = append(r.Dirs, DirResult{Direction: d.Direction, Device: d.Device})
			slots = append(slots, slot{i, j})
		}
	}
	if o.DryRun != nil {
		for i := range rs {
			if rs[i].Plan != nil {
				rs[i].State = DryRun
				o.dryStart(rs[i].Plan, &rs[i])
			}
		}
		return rs
	}
	o.probe(ts, rs, slots)
	for i := range rs {
		if rs[i].Plan != nil {
			o.start(ts[i], &rs[i])
		}
	}
	return rs
}

// validate plans the queue and decides whether to touch it at all.
func (o *Options) validate(t Target, r *Result) bool {
	q := t.Queue
	p, err := o.build(q, t.Facts)
	if err != nil {
		r.State, r.Err = Failed, err
		o.log("%s: not started: %v", q.Interface, err)
		return false
	}
	_, err = net.InterfaceByName(q.Interface)
	if _, ok := needsAddress[t.Facts.Proto]; ok {
		l3 := addressDevice(q, t.Facts)
		if l3ifi, l3err := net.InterfaceByName(l3); err != nil || l3err != nil || !routable(l3ifi) {
			r.State, r.Err = Waiting, fmt.Errorf("%s (proto %s) has no address yet; waiting for the hotplug event", l3, t.Facts.Proto)
			o.log("%s: %v", q.Interface, r.Err)
			return false
		}
	} else if err != nil && o.DryRun != nil {
		o.log("%s: device does not exist here; printing the batches anyway (dry run)", q.Interface)
	} else if err != nil {
		r.State, r.Err = Failed, fmt.Errorf("interface: device %s does not exist; check the interface option or bring the device up", q.Interface)
		o.log("%s: not started: %v", q.Interface, r.Err)
		return false
	}
	if o.Hotplug && p.IFB != "" && o.DryRun == nil {
		if _, err := net.InterfaceByName(p.IFB); err == nil {
			st, err := o.Runner.Show(p.IFB)
			if err == nil && shaped(st, p.IFB) {
				r.State, r.Err = Skipped, fmt.Errorf("hotplug: %s already has a qdisc; not touching it again (IFB bring-up under load crashed 5.15 NSS routers)", p.IFB)
				o.log("%s: %v", q.Interface, r.Err)
				return false
			}
		}
	}
	r.Plan = p
	return true
}

// addressDevice names the device whose address says the link is usable:
// the queue's own device when it is the protocol's (pppoe-wan, or ppp0 on a
// plain Linux box), else the one OpenWrt creates for the network section
// (pppoe-wan, ds-wan, map-wan). NSS queues sit on the physical port below it,
// as in the spec's example (interface wan, network wan proto pppoe device wan.7).
func addressDevice(q config.Queue, f linkinfo.Facts) string {
	prefix := needsAddress[f.Proto]
	if f.NetworkSection == "" || strings.HasPrefix(q.Interface, prefix) {
		return q.Interface
	}
	return prefix + f.NetworkSection
}

// routable reports an address other than link-local: a PPP link has its
// IPv6 link-local address before the session is usable.
func routable(ifi *net.Interface) bool {
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			return true
		}
	}
	return false
}

func shaped(st *tc.State, dev string) bool {
	for _, q := range st.Qdiscs {
		if q.Dev == dev && !q.Default() {
			return true
		}
	}
	return false
}

// slot names direction j of target i.
type slot struct{ i, j int }

// probe validates every direction's batch before any real device is touched.
// A direction whose ecn keyword tc refuses is re-planned without ECN.
func (o *Options) probe(ts []Target, rs []Result, slots []slot) {
	if o.Prober == nil || len(slots) == 0 {
		return
	}
	dir := func(s slot) *plan.Dir { return rs[s.i].Plan.Dirs[s.j] }
	res := func(s slot) *DirResult { return &rs[s.i].Dirs[s.j] }
	verdicts, err := o.Prober.Probe(batches(slots, dir))
	if err != nil {
		o.log("probe unavailable (%v); applying unprobed, a failed direction is rolled back", err)
		return
	}
	var retry []slot
	var alt []*plan.Dir
	for k, v := range verdicts {
		s := slots[k]
		switch {
		case v == nil:
		case refusesECN(dir(s), v):
			nd, err := o.withoutECN(ts[s.i], dir(s))
			if err != nil {
				res(s).Err = err
				continue
			}
			retry, alt = append(retry, s), append(alt, nd)
		default:
			res(s).Err = v
			o.log("%s %s: %v", res(s).Device, res(s).Direction, v)
		}
	}
	if len(retry) == 0 {
		return
	}
	vs, err := o.Prober.Probe(batches(retry, func(s slot) *plan.Dir { return alt[slices.Index(retry, s)] }))
	if err != nil {
		return
	}
	for n, s := range retry {
		if vs[n] != nil {
			res(s).Err = vs[n]
			o.log("%s %s: refused even without ecn: %v", res(s).Device, res(s).Direction, vs[n])
			continue
		}
		o.adopt(rs[s.i].Plan, s.j, res(s), alt[n])
	}
}

func batches(slots []slot, dir func(slot) *plan.Dir) [][][]string {
	out := make([][][]string, len(slots))
	for i, s := range slots {
		out[i] = dir(s).TC
	}
	return out
}

// refusesECN reports a refusal of a line that carries the ecn keyword in a
// direction planned with ECN: stock tc without the NSS patch does that.
func refusesECN(d *plan.Dir, err error) bool {
	if !d.ECN {
		return false
	}
	var argv []string
	var rej *tc.Rejection
	var be *tc.BatchError
	switch {
	case errors.As(err, &rej):
		argv = rej.Argv
	case errors.As(err, &be):
		_, argv = be.First()
	}
	return slices.Contains(argv, "ecn")
}

// withoutECN re-plans t with ECN off for d's direction.
func (o *Options) withoutECN(t Target, d *plan.Dir) (*plan.Dir, error) {
	q := t.Queue
	field := "egress_ecn"
	if d.Direction == plan.Ingress {
		q.IngressECN, field = false, "ingress_ecn"
	} else {
		q.EgressECN = false
	}
	p, err := o.build(q, t.Facts)
	if err != nil {
		return nil, err
	}
	for _, nd := range p.Dirs {
		if nd.Direction != d.Direction {
			continue
		}
		if nd.ECN {
			return nil, fmt.Errorf("%s: tc refuses the ecn keyword and the qdisc options force it; remove ecn from the %s options", field, d.Direction)
		}
		return nd, nil
	}
	return nil, fmt.Errorf("%s %s: cannot re-plan without ECN", d.Device, d.Direction)
}

// adopt puts the ECN-less direction nd in place of direction j and warns.
func (o *Options) adopt(p *plan.Plan, j int, dr *DirResult, nd *plan.Dir) {
	p.Dirs[j] = nd
	w := fmt.Sprintf("%s %s: tc refused the ecn keyword; shaping without ECN (a tc with the NSS patch keeps it)", nd.Device, nd.Direction)
	dr.Warnings = append(dr.Warnings, w)
	o.log("%s", w)
}

// start applies one validated queue. Only directions that passed validation
// are torn down and rebuilt: a refused one keeps whatever it had, and when
// none passed, the kernel is not touched at all.
func (o *Options) start(t Target, r *Result) {
	p := r.Plan
	down := o.teardown(p, r)
	if down == nil {
		r.State = Failed
		o.log("%s: no direction passed validation; kernel left untouched", p.Device)
		return
	}
	o.Runner.Batch("tc", true, down) // refusals only mean "nothing was there"
	o.log("%s: removed previous qdiscs (%d teardown lines)", p.Device, len(down))
	for j, d := range p.Dirs {
		dr := &r.Dirs[j]
		if dr.NotStarted {
			continue
		}
		if d.Direction == plan.Ingress {
			if err := o.raiseIFB(p.IFB, d); err != nil {
				dr.Err = err
				o.log("%s ingress: not applied: %v", p.Device, err)
				continue
			}
		}
		dr.Err = o.applyDir(t, r, j)
	}
	r.State = Started
	n := 0
	for _, d := range r.Dirs {
		if d.Err != nil {
			n++
		}
	}
	switch {
	case n == len(r.Dirs):
		r.State = Failed
	case n > 0:
		r.State = Partial
	}
}

// teardown is the batch a start runs first: the teardown of every direction
// that passed validation, then the clearing of the unshaped ones. It marks
// refused directions NotStarted and is nil when no direction passed.
func (o *Options) teardown(p *plan.Plan, r *Result) [][]string {
	var down [][]string
	for j, d := range p.Dirs {
		if r.Dirs[j].Err != nil {
			r.Dirs[j].NotStarted = true
			continue
		}
		down = append(down, d.Teardown...)
	}
	if down == nil {
		return nil
	}
	return append(down, p.Clear...)
}

// raiseIFB creates and raises the IFB only when it is missing or down, so a
// warm restart spends no process on it.
func (o *Options) raiseIFB(ifb string, d *plan.Dir) error {
	ifi, err := net.InterfaceByName(ifb)
	if err == nil && ifi.Flags&net.FlagUp != 0 {
		return nil
	}
	setup := d.Setup
	if err == nil {
		setup = nil
		for _, l := range d.Setup {
			if !(len(l) > 1 && l[0] == "link" && l[1] == "add") {
				setup = append(setup, l)
			}
		}
	}
	if _, err := o.Runner.Batch("ip", false, setup); err != nil {
		return fmt.Errorf("IFB %s: %w", ifb, err)
	}
	o.log("%s: IFB created and up", ifb)
	return nil
}

// applyDir runs one direction's batch. On a refusal it removes whatever the
// batch had added; a refused ecn keyword gets one retry without ECN.
func (o *Options) applyDir(t Target, r *Result, j int) error {
	d := r.Plan.Dirs[j]
	warns, err := o.Runner.Batch("tc", false, d.TC)
	for _, w := range warns {
		o.log("%s %s: %s", d.Device, d.Direction, w)
	}
	if err == nil {
		o.log("%s %s: shaped at %d kbit/s (%d tc lines)", d.Device, d.Direction, d.RateKbit, len(d.TC))
		return nil
	}
	o.Runner.Batch("tc", true, d.Teardown)
	o.log("%s %s: %v; rolled back", d.Device, d.Direction, err)
	if !refusesECN(d, err) {
		return err
	}
	nd, rerr := o.withoutECN(t, d)
	if rerr != nil {
		return rerr
	}
	o.adopt(r.Plan, j, &r.Dirs[j], nd)
	if _, err := o.Runner.Batch("tc", false, nd.TC); err != nil {
		o.Runner.Batch("tc", true, nd.Teardown)
		return err
	}
	return nil
}

// Stop removes the root and ingress qdiscs of each queue's device and the
// IFB's qdisc in one tc batch, then deletes the IFB except on nss, where it is
// kept (re-creating it under load crashed 5.15 NSS routers). It works from
// the queue alone, so a start made with an older configuration is removed
// too, and it is harmless when nothing was started.
func Stop(ts []Target, o Options) []Result {
	rs := make([]Result, len(ts))
	for i, t := range ts {
		q := t.Queue
		rs[i] = Result{Section: q.Section, Device: q.Interface, State: Stopped}
		ifb := q.IFB
		if ifb == "" {
			ifb = plan.IFBName(q.Interface, q.Backend)
		}
		down := [][]string{
			{"qdisc", "del", "dev", q.Interface, "ingress"},
			{"qdisc", "del", "dev", ifb, "root"},
			{"qdisc", "del", "dev", q.Interface, "root"},
		}
		_, ifbErr := net.InterfaceByName(ifb)
		del := ifbErr == nil && q.Backend != config.NSS
		if o.DryRun != nil {
			rs[i].State = DryRun
			writeBatch(o.DryRun, "tc -force", down)
			if del {
				writeBatch(o.DryRun, "ip", [][]string{{"link", "del", "dev", ifb}})
			}
			continue
		}
		o.Runner.Batch("tc", true, down)
		if del {
			if _, err := o.Runner.Batch("ip", false, [][]string{{"link", "del", "dev", ifb}}); err != nil {
				rs[i].State, rs[i].Err = Failed, err
			}
		}
		kept := ""
		if q.Backend == config.NSS {
			kept = ", IFB kept (nss)"
		}
		o.log("%s: stopped%s", q.Interface, kept)
	}
	return rs
}

// dryStart prints the batches a start would run, as runnable shell.
func (o *Options) dryStart(p *plan.Plan, r *Result) {
	down := o.teardown(p, r)
	fmt.Fprintf(o.DryRun, "# %s: start %s (%s)\n", p.Section, p.Device, p.Backend)
	writeBatch(o.DryRun, "tc -force", down)
	for _, d := range p.Dirs {
		if d.Direction == plan.Ingress {
			if ifi, err := net.InterfaceByName(p.IFB); err != nil || ifi.Flags&net.FlagUp == 0 {
				writeBatch(o.DryRun, "ip", d.Setup)
			}
		}
		writeBatch(o.DryRun, "tc", d.TC)
	}
}

func writeBatch(w io.Writer, prog string, lines [][]string) {
	text, err := tc.Render(lines)
	if err != nil {
		fmt.Fprintf(w, "# cannot render batch: %v\n", err)
		return
	}
	fmt.Fprintf(w, "%s -batch - <<'EOF'\n%sEOF\n", prog, text)
}

// Readback turns what the kernel holds into plan nodes, for comparison with
// a plan's Tree. Kernel-default qdiscs (handle 0:) are left out.
func Readback(st *tc.State) []plan.Node {
	var out []plan.Node
	for _, q := range st.Qdiscs {
		if q.Default() {
			continue
		}
		parent := q.Parent
		if q.Root {
			parent = "root"
		}
		out = append(out, plan.Node{Dev: q.Dev, Type: "qdisc", Kind: q.Kind, Handle: q.Handle, Parent: parent})
	}
	for _, c := range st.Classes {
		parent := c.Parent
		if parent == "root" {
			parent = strings.SplitN(c.Handle, ":", 2)[0] + ":"
		}
		out = append(out, plan.Node{Dev: c.Dev, Type: "class", Kind: c.Kind, Handle: c.Handle, Parent: parent})
	}
	for _, f := range st.Filters {
		out = append(out, plan.Node{Dev: f.Dev, Type: "filter", Kind: f.Kind, Parent: f.Parent})
	}
	return out
}

// Compare lists the planned nodes the kernel lacks and the kernel's nodes
// the plan does not have.
func Compare(tree, got []plan.Node) (missing, extra []plan.Node) {
	left := slices.Clone(got)
	for _, n := range tree {
		if i := slices.Index(left, n); i >= 0 {
			left = slices.Delete(left, i, i+1)
		} else {
			missing = append(missing, n)
		}
	}
	return missing, left
}

// Status is the kernel's view of one queue next to its plan.
type Status struct {
	Section string
	Plan    *plan.Plan
	State   *tc.State
	Missing []plan.Node // planned but absent
	Extra   []plan.Node // present but not planned
	Err     error
}

// Matches reports a queue shaped exactly as planned.
func (s Status) Matches() bool {
	return s.Err == nil && len(s.Missing) == 0 && len(s.Extra) == 0
}

// Inspect reads what each queue's devices hold and compares it to the plan.
func Inspect(ts []Target, o Options) []Status {
	out := make([]Status, len(ts))
	for i, t := range ts {
		s := &out[i]
		s.Section = t.Queue.Section
		if s.Plan, s.Err = o.build(t.Queue, t.Facts); s.Err != nil {
			continue
		}
		var devs []string
		for _, d := range []string{s.Plan.Device, s.Plan.IFB} {
			if _, err := net.InterfaceByName(d); d != "" && err == nil {
				devs = append(devs, d)
			}
		}
		if len(devs) == 0 {
			s.Err = fmt.Errorf("device %s does not exist", s.Plan.Device)
			continue
		}
		if s.State, s.Err = o.Runner.Show(devs...); s.Err != nil {
			continue
		}
		var tree []plan.Node
		for _, d := range s.Plan.Dirs {
			tree = append(tree, d.Tree...)
		}
		s.Missing, s.Extra = Compare(tree, Readback(s.State))
	}
	return out
}
