package apply

import (
	"errors"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// reconcile decides what a hotplug start changes, from the live tree of the
// queue's own devices compared with the plan (drift.Compare): nothing when
// everything is as planned (an ifupdate storm costs one read per event and
// no change); a direction already as planned is kept; an ingress direction
// whose IFB is still shaped but whose WAN device was re-created (a PPPoE
// reconnect makes a new pppoe-wan) gets only its ingress hook and redirect
// back, so the IFB is never touched (re-raising it under load crashed 5.15
// NSS routers); anything else is rebuilt. clearStale says whether a direction the
// plan does not shape holds a stale tree. done means there is nothing to do
// and r is final.
func (o *Options) reconcile(p *plan.Plan, r *Result) (todo []work, clearStale, done bool) {
	todo = make([]work, len(p.Dirs))
	s, err := o.Kernel.Read(o.devices(p.Device, p.IFB)...)
	if err != nil {
		o.log("%s: hotplug: cannot read the live tree (%v); rebuilding", p.Device, err)
		return todo, true, false
	}
	diffs := drift.Compare(p, s)
	if len(diffs) == 0 {
		for j := range r.Dirs {
			r.Dirs[j].Kept = true
		}
		r.State, r.Err = Skipped, errors.New("already shaped as planned; nothing changed")
		o.log("%s: hotplug: %v", p.Device, r.Err)
		return todo, false, true
	}
	shaped := map[config.Direction]bool{}
	for j, d := range p.Dirs {
		shaped[d.Direction] = true
		var mine []drift.Diff
		for _, df := range diffs {
			if df.Direction == d.Direction {
				mine = append(mine, df)
			}
		}
		switch {
		case len(mine) == 0:
			todo[j], r.Dirs[j].Kept = keep, true
			o.log("%s %s: hotplug: already as planned, left alone", p.Device, d.Direction.Side())
		case d.Direction == config.Download && onDevice(mine, p.Device) && o.Kernel.Link(p.IFB).Up:
			todo[j] = redirectOnly
			o.log("%s ingress: hotplug: %s still shaped; restoring only the redirect (%s)", p.Device, p.IFB, mine[0])
		default:
			o.log("%s %s: hotplug: rebuilding (%s)", p.Device, d.Direction.Side(), mine[0])
		}
	}
	for _, df := range diffs {
		clearStale = clearStale || !shaped[df.Direction]
	}
	return todo, clearStale, false
}

// onDevice reports diffs that are all nodes of dev (the WAN side of the
// ingress direction), none of its IFB and no value.
func onDevice(ds []drift.Diff, dev string) bool {
	for _, d := range ds {
		if d.Kind == drift.Value || d.Node.Dev != dev {
			return false
		}
	}
	return true
}
