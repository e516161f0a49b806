package apply

import (
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// Stop removes, for each queue, what a start leaves: the ingress qdisc and
// its redirect, the IFB's root, the device's root, then deletes the IFB
// except on nss, where it is kept (re-creating it under load crashed 5.15
// NSS routers). It reads the kernel first and removes only what is there
// and sqmkit's (a device root sqmkit never builds stays), reads it again
// afterwards, and fails — never claims "stopped" — while anything remains.
// It works from the queue alone, so a start made with an older
// configuration is removed too, and it is harmless when nothing was started.
// With o.Hotplug (an ifdown event), a queue whose device is still there and
// up is left alone: an alias interface (wan6 on pppoe-wan) went down, not
// the device the shaper sits on.
func Stop(ts []Target, o Options) []Result {
	rs := make([]Result, len(ts))
	for i, t := range ts {
		q := t.Queue
		r := &rs[i]
		*r = Result{Section: q.Section, Device: q.Interface, State: Stopped}
		if l := o.Kernel.Link(q.Interface); o.Hotplug && l.Exists && l.Up {
			r.State, r.Err = Skipped, fmt.Errorf("%s is still up (an interface on it went down): left shaped", q.Interface)
			o.log("%s: ifdown: %v", q.Interface, r.Err)
			continue
		}
		ifb := plan.IFBOf(q)
		delIFB := q.Backend != config.NSS && o.Kernel.Link(ifb).Exists
		if o.DryRun != nil {
			r.State = DryRun
			writeBatch(o.DryRun, "tc -force", plan.Teardown(q.Interface, ifb))
			if delIFB {
				writeBatch(o.DryRun, "ip", plan.RemoveIFB(ifb))
			}
			continue
		}
		release, err := o.Locks.acquire(q.Interface, false)
		if err != nil {
			r.State, r.Err = lockState(err), err
			o.log("%s: %v", q.Interface, err)
			continue
		}
		o.stop(q, ifb, delIFB, r)
		o.forgetRates(q.Interface)
		release()
	}
	return rs
}

func (o *Options) stop(q config.Queue, ifb string, delIFB bool, r *Result) {
	removed, left, err := o.remove(q.Interface, ifb, plan.Egress, plan.Ingress)
	r.Done = removed
	if err != nil {
		r.State = Failed
		r.Err = fmt.Errorf("%w; still there: %s", err, strings.Join(left, "; "))
		o.log("%s: stop failed: %v", q.Interface, r.Err)
		return
	}
	if delIFB {
		if _, err := o.Kernel.Batch("ip", false, plan.RemoveIFB(ifb)); err != nil || o.Kernel.Link(ifb).Exists {
			r.State, r.Err = Failed, fmt.Errorf("IFB %s could not be deleted: %v", ifb, err)
			o.log("%s: stop failed: %v", q.Interface, r.Err)
			return
		}
		r.Done = append(r.Done, "IFB "+ifb)
	}
	switch {
	case len(r.Done) == 0:
		o.log("%s: stopped (nothing of sqmkit's was there)", q.Interface)
	case q.Backend == config.NSS:
		o.log("%s: stopped: removed %s; IFB kept (nss)", q.Interface, strings.Join(r.Done, ", "))
	default:
		o.log("%s: stopped: removed %s", q.Interface, strings.Join(r.Done, ", "))
	}
}
