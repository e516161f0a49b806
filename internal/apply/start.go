package apply

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc"
)

// needsAddress lists the protocols whose device only becomes usable once
// the link is up and addressed; until then a start waits for hotplug. The
// value is the prefix OpenWrt gives the protocol's device (pppoe-wan,
// ds-wan for DS-Lite, map-wan).
var needsAddress = map[string]string{"pppoe": "pppoe-", "dslite": "ds-", "map": "map-"}

// Start applies every target. Per queue it validates and probes first, then,
// holding the interface's lock, tears down what a previous start left and
// applies egress (one tc -force batch), raises the IFB if needed (one ip
// batch) and applies ingress (one tc batch): a warm start runs sqmkit, ip
// and two tc. A failed direction is rolled
// back and reported with what the kernel still holds; the other one still
// applies.
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
		if rs[i].Plan == nil {
			continue
		}
		release, err := o.Locks.acquire(rs[i].Device, o.Hotplug)
		if err != nil {
			// nothing was done, so no direction has an outcome of its own
			rs[i].State, rs[i].Err, rs[i].Dirs = lockState(err), err, nil
			o.log("%s: %v", rs[i].Device, err)
			continue
		}
		prev, hadPrev, err := o.Records.Get(rs[i].Device)
		if err != nil {
			o.log("%s: %v", rs[i].Device, err)
		}
		o.retire(ts[i].Queue, rs[i].Plan)
		if err := o.intend(ts[i].Queue, &rs[i], prev, hadPrev); err != nil {
			rs[i].State, rs[i].Err = Failed, fmt.Errorf("cannot record what this start would apply, so it applies nothing (%v); free space in %s", err, o.Records.Dir)
			o.log("%s: not started: %v", rs[i].Device, rs[i].Err)
			release()
			continue
		}
		o.start(ts[i], &rs[i])
		o.keep(ts[i].Queue, &rs[i], prev, hadPrev)
		if !o.Hotplug {
			// the config is the truth again: forget rates set since
			o.forgetRates(rs[i].Device)
		}
		release()
	}
	return rs
}

// validate plans the queue and decides whether to touch it at all.
func (o *Options) validate(t Target, r *Result) bool {
	q := t.Queue
	build := o.fresh // a start tries cake_mq again; a hotplug event keeps what is there
	if o.Hotplug {
		build = o.build
	}
	p, err := build(q, t.Facts)
	if err != nil {
		r.State, r.Err = Failed, err
		o.log("%s: not started: %v", q.Interface, err)
		return false
	}
	dev := o.Kernel.Link(q.Interface)
	if _, ok := needsAddress[t.Facts.Proto]; ok {
		l3 := addressDevice(q, t.Facts)
		if !dev.Exists || !o.Kernel.Link(l3).Routable {
			r.State, r.Err = Waiting, fmt.Errorf("%s (proto %s) has no address yet; waiting for the hotplug event", l3, t.Facts.Proto)
			o.log("%s: %v", q.Interface, r.Err)
			return false
		}
	} else if !dev.Exists && o.DryRun != nil {
		o.log("%s: device does not exist here; printing the batches anyway (dry run)", q.Interface)
	} else if !dev.Exists {
		r.State, r.Err = Failed, fmt.Errorf("interface: device %s does not exist; check the interface option or bring the device up", q.Interface)
		o.log("%s: not started: %v", q.Interface, r.Err)
		return false
	}
	if err := o.checkIFB(q, p); err != nil {
		r.State, r.Err = Failed, err
		o.log("%s: not started: %v", q.Interface, err)
		return false
	}
	r.Plan = p
	return true
}

// addressDevice names the device whose address says the link is usable:
// the queue's own device when it is the protocol's (pppoe-wan, or ppp0 on a
// plain Linux box), else the one OpenWrt creates for the network section
// (pppoe-wan, ds-wan, map-wan). NSS queues sit on the physical port below it,
// as in the worked example of docs/design.md (interface wan, network wan
// proto pppoe device wan.7).
func addressDevice(q config.Queue, f linkinfo.Facts) string {
	prefix := needsAddress[f.Proto]
	if f.NetworkSection == "" || strings.HasPrefix(q.Interface, prefix) {
		return q.Interface
	}
	return prefix + f.NetworkSection
}

// work is what one start does to one direction.
type work int

const (
	rebuild      work = iota // tear down and apply the whole direction
	keep                     // hotplug: already as planned
	redirectOnly             // hotplug: the IFB is shaped, only the WAN side is gone
)

// start applies one validated queue. Only directions that passed
// validation are touched: a refused one keeps whatever it had, and when
// none passed, the kernel is not touched at all.
func (o *Options) start(t Target, r *Result) {
	p := r.Plan
	todo := make([]work, len(p.Dirs))
	clearStale := true
	if o.Hotplug {
		var done bool
		if todo, clearStale, done = o.reconcile(p, r); done {
			return
		}
	}
	down, some := o.teardown(p, r, todo, clearStale)
	if !some {
		r.State = Failed
		o.log("%s: no direction passed validation; kernel left untouched", p.Device)
		return
	}
	// The teardown rides in front of the egress batch when egress is
	// rebuilt, saving a process: with -force, a teardown line that finds
	// nothing fails harmlessly and the egress lines after it are judged by
	// their own line numbers. Ingress never takes it: -force would go on to
	// attach the redirect after a refused IFB qdisc.
	lead := len(down) > 0 && p.Dirs[0].Direction == config.Upload && todo[0] == rebuild && !r.Dirs[0].NotStarted
	if len(down) > 0 && !lead {
		if _, err := o.Kernel.Batch("tc", true, down); err != nil && !isRefusal(err) {
			// tc did not run: nothing was removed and nothing can be added
			o.failAll(r, fmt.Errorf("removing the previous qdiscs: %w", err))
			return
		}
		o.log("%s: removed previous qdiscs (%d teardown lines)", p.Device, len(down))
	}
	for j, d := range p.Dirs {
		dr := &r.Dirs[j]
		if dr.NotStarted || dr.Kept {
			continue
		}
		lines := d.TC
		if todo[j] == redirectOnly {
			lines = d.Redirect
		} else if d.Direction == config.Download {
			created, err := o.raiseIFB(p.Device, p.IFB, d)
			r.createdIFB = created
			if err != nil {
				dr.Err = err
				o.log("%s ingress: not applied: %v", p.Device, err)
				continue
			}
		}
		var front [][]string
		if lead && j == 0 {
			front = down
		}
		ran, err := o.applyDir(t, r, j, front, lines)
		if dr.Err = err; !ran {
			// tc did not run: nothing was removed and nothing can be added
			o.failAll(r, fmt.Errorf("removing the previous qdiscs: %w", dr.Err))
			return
		}
	}
	if r.Failed() && !o.Kernel.Link(p.Device).Exists {
		// A PPPoE session that drops mid-start takes its device and every
		// qdisc on it away: a direction applied before that is gone too.
		gone := fmt.Errorf("%s disappeared during the start, and its qdiscs with it; its hotplug event will start it again", p.Device)
		for j := range r.Dirs {
			if !r.Dirs[j].NotStarted && !r.Dirs[j].Kept && r.Dirs[j].Err == nil {
				r.Dirs[j].Err = gone
			}
		}
		o.log("%v", gone)
	}
	r.State = outcome(r.Dirs)
}

// outcome is the queue's state from its directions' results.
func outcome(ds []DirResult) State {
	n := 0
	for _, d := range ds {
		if d.Err != nil {
			n++
		}
	}
	switch {
	case n == len(ds):
		return Failed
	case n > 0:
		return Partial
	}
	return Started
}

// failAll marks every direction that was to be changed as failed with err;
// nothing was changed, so nothing is left to report.
func (o *Options) failAll(r *Result, err error) {
	for j := range r.Dirs {
		if !r.Dirs[j].NotStarted && !r.Dirs[j].Kept {
			r.Dirs[j].Err, r.Dirs[j].Unchanged = err, true
		}
	}
	r.State = Failed
	o.log("%s: %v; nothing was changed", r.Device, err)
}

// teardown is the batch a start runs first: the teardown of every direction
// to rebuild, the ingress hook of a redirect-only one, then (clearStale) the
// clearing of the unshaped directions. It marks refused directions
// NotStarted; some is false when no direction passed validation.
func (o *Options) teardown(p *plan.Plan, r *Result, todo []work, clearStale bool) (down [][]string, some bool) {
	for j, d := range p.Dirs {
		switch {
		case r.Dirs[j].Err != nil:
			r.Dirs[j].NotStarted = true
			continue
		case todo[j] == rebuild:
			down = append(down, d.Teardown...)
		case todo[j] == redirectOnly:
			down = append(down, d.Teardown[:1]...) // the ingress hook only, never the IFB
		}
		some = true
	}
	if some && clearStale {
		down = append(down, p.Clear...)
	}
	return down, some
}

// isRefusal reports an error in which tc ran and refused lines, as opposed
// to tc not running at all (not installed, a batch it cannot carry).
func isRefusal(err error) bool {
	var be *tc.BatchError
	return errors.As(err, &be) && be.Failures[0].Line > 0
}

// raiseIFB creates and raises the IFB only when it is missing or down, so a
// warm restart spends no process on it, and returns the ifindex of an IFB
// it created (0 when it was there). An IFB this call created but could not
// raise is deleted again. An IFB of sqmkit's with fewer TX queues than a
// cake_mq plan spreads over (one made for plain cake) is made again, after
// wan's redirect to it is gone; another's stays, and cake_mq falls back to
// cake on it (TestStartRemakesIFBForCakeMQ).
func (o *Options) raiseIFB(wan, ifb string, d *plan.Dir) (created int, err error) {
	before := o.Kernel.Link(ifb)
	if before.Exists && d.Queues > 1 && before.TXQueues < d.Queues && o.madeIFB(wan) {
		o.Kernel.Batch("tc", true, [][]string{{"qdisc", "del", "dev", wan, "ingress"}})
		if _, err := o.Kernel.Batch("ip", false, plan.RemoveIFB(ifb)); err != nil {
			return 0, fmt.Errorf("IFB %s has %d TX queues, cake_mq spreads over %d, and removing it to make it again failed: %w", ifb, before.TXQueues, d.Queues, err)
		}
		o.log("%s: IFB had %d TX queues; made again with %d for cake_mq", ifb, before.TXQueues, d.Queues)
		before = Link{}
	}
	if before.Exists && before.Up {
		return 0, nil
	}
	setup := d.Setup
	if before.Exists {
		// someone's IFB, down: raised, never given sqmkit's mark, which
		// would make it one a stop deletes (TestRecordsWhatItApplied)
		setup = [][]string{{"link", "set", "dev", ifb, "up"}}
	}
	if _, err := o.Kernel.Batch("ip", false, setup); err != nil {
		if !before.Exists && o.Kernel.Link(ifb).Exists {
			if _, derr := o.Kernel.Batch("ip", false, plan.RemoveIFB(ifb)); derr != nil {
				return o.Kernel.Link(ifb).Index, fmt.Errorf("IFB %s: %w (and removing it again failed: %v)", ifb, err, derr)
			}
			return 0, fmt.Errorf("IFB %s: %w (created, then removed again)", ifb, err)
		}
		return 0, fmt.Errorf("IFB %s: %w", ifb, err)
	}
	o.log("%s: IFB created and up", ifb)
	if before.Exists {
		return 0, nil
	}
	return o.Kernel.Link(ifb).Index, nil
}

// applyDir runs one direction's lines, after the teardown lines front
// when there are any (one tc -force batch). On a refusal it rolls back
// whatever the batch had added; a refused ecn keyword gets one retry
// without ECN. ran is false when tc did not run at all, so front did not
// either.
func (o *Options) applyDir(t Target, r *Result, j int, front, lines [][]string) (ran bool, err error) {
	d := r.Plan.Dirs[j]
	warns, err := o.Kernel.Batch("tc", len(front) > 0, append(front[:len(front):len(front)], lines...))
	for _, w := range warns {
		o.log("%s %s: %s", d.Device, d.Direction.Side(), w)
	}
	if len(front) > 0 {
		if err != nil && !isRefusal(err) {
			return false, err
		}
		o.log("%s: removed previous qdiscs (%d teardown lines)", r.Plan.Device, len(front))
		err = after(err, len(front), lines)
	}
	if err == nil {
		o.log("%s %s: shaped at %d kbit/s (%d tc lines)", d.Device, d.Direction.Side(), d.RateKbit, len(lines))
		return true, nil
	}
	r.Dirs[j].Left = o.rollback(r.Plan, d)
	if len(r.Dirs[j].Left) > 0 {
		return true, err
	}
	nd, ok, rerr := o.fallback(t, d, err)
	if !ok {
		return true, err
	}
	if rerr != nil {
		return true, rerr
	}
	o.adopt(r.Plan, j, &r.Dirs[j], nd, err)
	if _, err := o.Kernel.Batch("tc", false, nd.TC); err != nil {
		r.Dirs[j].Left = o.rollback(r.Plan, nd)
		return true, err
	}
	o.log("%s %s: shaped at %d kbit/s (%s)", nd.Device, nd.Direction.Side(), nd.RateKbit, nd.Tree[0].Kind)
	return true, nil
}

// after keeps the failures of a batch that came after its first n lines,
// numbered from there: what lines did, the teardown in front of them set
// aside. A tool that died without naming a line counts against lines.
func after(err error, n int, lines [][]string) error {
	var be *tc.BatchError
	if !errors.As(err, &be) {
		return err
	}
	var fs []tc.Failure
	for _, f := range be.Failures {
		switch {
		case f.Line == 0:
			fs = append(fs, f)
		case f.Line > n:
			fs = append(fs, tc.Failure{Line: f.Line - n, Msg: f.Msg})
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return &tc.BatchError{Prog: be.Prog, Lines: lines, Failures: fs, Err: be.Err}
}
