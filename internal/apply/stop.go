package apply

import (
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// Stop removes, for each queue, what a start left on its device: the
// ingress qdisc and its redirect, the IFB's root, the device's root, then
// the IFB when sqmkit created it, except on nss, where it is kept
// (re-creating it under load crashed 5.15 NSS routers). What the device's
// record says was applied wins over the queue as configured now, so a
// start made with another configuration is removed too; without a record,
// only qdiscs sqmkit builds are removed and no device is deleted. It reads
// the kernel first and removes only what is there and sqmkit's (a device
// root sqmkit never builds stays), reads it again afterwards, and fails —
// never claims "stopped" — while anything remains. It is harmless when
// nothing was started. With o.Hotplug (an ifdown event), a queue whose
// device is still there and up is left alone: an alias interface (wan6 on
// pppoe-wan) went down, not the device the shaper sits on.
func Stop(ts []Target, o Options) []Result {
	recs := make([]applied.Record, len(ts))
	for i, t := range ts {
		q := t.Queue
		rec, ok, err := o.Records.Get(q.Interface)
		if err != nil {
			o.log("%s: %v", q.Interface, err)
		}
		if !ok {
			rec = applied.Record{Section: q.Section, Device: q.Interface, Backend: string(q.Backend), IFB: plan.IFBOf(q)}
		}
		recs[i] = rec
	}
	return o.stopRecords(recs, true)
}

// stop removes dev's tree and ifb's (an IFB or ""), then deletes ifb when
// delIFB says the record's start created it.
func (o *Options) stop(dev, ifb string, b config.Backend, delIFB bool, r *Result) {
	removed, left, err := o.remove(dev, ifb, config.Upload, config.Download)
	r.Done = removed
	if err != nil {
		r.State = Failed
		r.Err = fmt.Errorf("%w; still there: %s", err, strings.Join(left, "; "))
		o.log("%s: stop failed: %v", dev, r.Err)
		return
	}
	if delIFB {
		if _, err := o.Kernel.Batch("ip", false, plan.RemoveIFB(ifb)); err != nil || o.Kernel.Link(ifb).Exists {
			r.State, r.Err = Failed, fmt.Errorf("IFB %s could not be deleted: %v", ifb, err)
			o.log("%s: stop failed: %v", dev, r.Err)
			return
		}
		r.Done = append(r.Done, "IFB "+ifb)
	}
	switch {
	case len(r.Done) == 0:
		o.log("%s: stopped (nothing of sqmkit's was there)", dev)
	case b == config.NSS && ifb != "":
		o.log("%s: stopped: removed %s; IFB kept (nss)", dev, strings.Join(r.Done, ", "))
	default:
		o.log("%s: stopped: removed %s", dev, strings.Join(r.Done, ", "))
	}
}
