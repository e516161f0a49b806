package apply

import (
	"fmt"
	"time"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/plan"
)

// checkIFB refuses an IFB name that belongs to another kind of device:
// sqmkit would take over its root qdisc, redirect the download into it,
// and a stop would delete it (an `ifb 'br-lan'` once deleted the LAN
// bridge). TestForeignIFBRefused replays it on a real kernel.
func (o *Options) checkIFB(q config.Queue, p *plan.Plan) error {
	if p.IFB == "" {
		return nil
	}
	l := o.Kernel.Link(p.IFB)
	if !l.Exists || l.Kind == "ifb" {
		return nil
	}
	kind := l.Kind
	if kind == "" {
		kind = "network port"
	}
	why := fmt.Sprintf("device %s exists and is a %s, not an IFB: sqmkit shapes the download on an IFB of its own and never takes over another device", p.IFB, kind)
	if q.IFB != "" {
		return q.Bad("ifb", q.IFB, "%s (fix: remove option ifb, or name a device that does not exist yet, e.g. %s)", why, plan.IFBName(q.Interface, q.Backend)+"x")
	}
	return fmt.Errorf("ifb: %s (fix: set option ifb to a name no device uses, e.g. ifb4%.11s)", why, q.Section)
}

// retire stops what earlier starts left that this start replaces: the
// same section applied on another device (a queue moved from wan to
// pppoe-wan would otherwise be shaped twice), and this device's record
// when its IFB changes with the backend or the ifb option. Their own
// records say what to remove, whatever the configuration says now.
func (o *Options) retire(q config.Queue, p *plan.Plan) {
	recs, err := o.Records.All()
	if err != nil {
		o.log("%s: %v", q.Interface, err) // the readable ones are still retired
	}
	for _, rec := range recs {
		moved := rec.Section == q.Section && rec.Device != q.Interface
		newIFB := rec.Device == q.Interface && rec.IFB != "" && rec.IFB != p.IFB
		if !moved && !newIFB {
			continue
		}
		if moved {
			o.log("%s: section %s moved to %s; removing what it left on %s", rec.Device, q.Section, q.Interface, rec.Device)
		} else {
			o.log("%s: the download moves from %s to %s; removing the old tree first", rec.Device, rec.IFB, p.IFB)
		}
		full := *o
		full.Hotplug = false // not an ifdown: the old tree goes whether its device is up or not
		res := full.stopRecords([]applied.Record{rec}, rec.Device != q.Interface)
		if res[0].Failed() {
			o.log("%s: %v", rec.Device, res[0].Err)
		}
	}
}

// keep writes what a start left on the queue's device, or forgets the
// device when nothing is left. An IFB this start created is the record's
// to delete; one that was there already is only if an earlier record of
// this device created it (the same ifindex).
func (o *Options) keep(q config.Queue, r *Result, prev applied.Record, hadPrev bool) {
	if r.Plan == nil || r.State == Waiting || r.State == DryRun {
		return
	}
	rec := applied.Record{Section: q.Section, Device: r.Plan.Device, Backend: string(r.Plan.Backend), Script: q.Script, At: time.Now().UTC()}
	left := false
	for j, d := range r.Plan.Dirs {
		dr := r.Dirs[j]
		held := false
		switch {
		case dr.NotStarted, dr.Unchanged: // refused, or tc never ran: it keeps what it had
			held = hadPrev && (d.Direction == config.Upload && prev.Egress || d.Direction == config.Download && prev.Ingress)
		case dr.Err == nil, len(dr.Left) > 0:
			held = true
		}
		left = left || held
		switch {
		case held && dr.PlainCake != "":
			rec.PlainCake = dr.PlainCake
		case held && (dr.Kept || dr.NotStarted || dr.Unchanged) && hadPrev && prev.PlainCake != "":
			rec.PlainCake = prev.PlainCake // a hotplug event kept what that start applied
		}
		if d.Direction == config.Upload {
			rec.Egress = held
		} else {
			rec.Ingress = held
		}
	}
	if r.Plan.IFB != "" {
		rec.IFB = r.Plan.IFB
		l := o.Kernel.Link(rec.IFB)
		switch {
		case r.createdIFB != 0 && l.Index == r.createdIFB:
			rec.IFBCreated, rec.IFBIndex = true, l.Index
		case hadPrev && prev.IFB == rec.IFB && prev.IFBCreated && prev.IFBIndex == l.Index:
			rec.IFBCreated, rec.IFBIndex = true, l.Index
		case l.Kind == "ifb" && l.Alias == plan.IFBAlias: // an earlier start's (nss keeps its IFB)
			rec.IFBCreated, rec.IFBIndex = true, l.Index
		}
		// an IFB this start created and that is still there is the
		// record's, even when no direction is left on it
		left = left || rec.IFBCreated
	}
	var err error
	if left {
		err = o.Records.Put(rec)
	} else {
		err = o.Records.Delete(r.Plan.Device)
	}
	if err != nil {
		o.log("%s: cannot keep the record of what was applied: %v", r.Plan.Device, err)
	}
}

// StopRecords removes what the records say earlier starts applied, each
// under its device's lock, and forgets each record once its device holds
// nothing of sqmkit's. With o.Hotplug (an ifdown event), a device still
// there and up is left alone.
func StopRecords(recs []applied.Record, o Options) []Result {
	return o.stopRecords(recs, true)
}

func (o *Options) stopRecords(recs []applied.Record, lock bool) []Result {
	rs := make([]Result, len(recs))
	for i, rec := range recs {
		r := &rs[i]
		*r = Result{Section: rec.Section, Device: rec.Device, State: Stopped}
		if l := o.Kernel.Link(rec.Device); o.Hotplug && l.Exists && l.Up {
			r.State, r.Err = Skipped, fmt.Errorf("%s is still up (an interface on it went down): left shaped", rec.Device)
			o.log("%s: ifdown: %v", rec.Device, r.Err)
			continue
		}
		if o.DryRun != nil {
			r.State = DryRun
			writeBatch(o.DryRun, "tc -force", plan.Teardown(rec.Device, rec.IFB))
			if o.ownsIFB(rec) {
				writeBatch(o.DryRun, "ip", plan.RemoveIFB(rec.IFB))
			}
			continue
		}
		release := func() {}
		if lock {
			var err error
			if release, err = o.Locks.acquire(rec.Device, false); err != nil {
				r.State, r.Err = lockState(err), err
				o.log("%s: %v", rec.Device, err)
				continue
			}
			// the record as it is now, under the lock: a start that held
			// the lock meanwhile may have made an IFB the caller's copy,
			// read before, does not name (TestStopReadsUnderLock)
			if fresh, ok, err := o.Records.Get(rec.Device); err == nil && ok {
				rec = fresh
			}
		}
		o.stop(rec.Device, o.ifbOrNone(rec.IFB), config.Backend(rec.Backend), o.ownsIFB(rec), r)
		if r.State == Stopped {
			if err := o.Records.Delete(rec.Device); err != nil {
				o.log("%s: cannot forget its record: %v", rec.Device, err)
			}
		}
		o.forgetRates(rec.Device)
		release()
	}
	return rs
}

// ownsIFB: the record's IFB is the one its start created, still an IFB
// and not re-created since, carrying sqmkit's mark (its alias: a record
// alone, which anyone can write, never deletes a device;
// TestForgedRecord), and the backend lets a stop delete it (nss keeps
// its IFB: re-creating one under load crashed 5.15 NSS routers).
func (o *Options) ownsIFB(rec applied.Record) bool {
	if rec.IFB == "" || !rec.IFBCreated || config.Backend(rec.Backend) == config.NSS && !o.Uninstall {
		return false
	}
	l := o.Kernel.Link(rec.IFB)
	// index 0: a write-ahead record made before the IFB existed
	return l.Exists && l.Kind == "ifb" && (l.Index == rec.IFBIndex || rec.IFBIndex == 0) && l.Alias == plan.IFBAlias
}

// intend writes, before the kernel changes, the record of everything
// this start may leave on the queue's device (write-ahead): a start that
// dies on the way is still stopped by its record, and a start that cannot
// record (a full /var/run) changes nothing (TestStartWriteAhead).
func (o *Options) intend(q config.Queue, r *Result, prev applied.Record, hadPrev bool) error {
	if o.DryRun != nil {
		return nil
	}
	p := r.Plan
	rec := applied.Record{Section: q.Section, Device: p.Device, Backend: string(p.Backend), Script: q.Script, At: time.Now().UTC(), Pending: true}
	for _, d := range p.Dirs {
		if d.Direction == config.Upload {
			rec.Egress = true
		} else {
			rec.Ingress = true
		}
	}
	if hadPrev {
		rec.Egress, rec.Ingress = rec.Egress || prev.Egress, rec.Ingress || prev.Ingress
	}
	if p.IFB != "" {
		rec.IFB = p.IFB
		switch l := o.Kernel.Link(p.IFB); {
		case !l.Exists: // this start makes it
			rec.IFBCreated = true
		case hadPrev && prev.IFB == p.IFB && prev.IFBCreated:
			rec.IFBCreated, rec.IFBIndex = true, prev.IFBIndex
		}
	}
	return o.Records.Put(rec)
}

// madeIFB: wan's last start created its IFB, which is still that one.
func (o *Options) madeIFB(wan string) bool {
	rec, ok, err := o.Records.Get(wan)
	return err == nil && ok && o.ownsIFB(rec)
}

// ifbOrNone is name when it is an IFB (or gone), else "": a stop never
// touches the root qdisc of a device that is not an IFB.
func (o *Options) ifbOrNone(name string) string {
	if name == "" {
		return ""
	}
	if l := o.Kernel.Link(name); l.Exists && l.Kind != "ifb" {
		o.log("%s is not an IFB; its qdiscs are left alone", name)
		return ""
	}
	return name
}
