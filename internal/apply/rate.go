package apply

import (
	"errors"
	"fmt"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
)

// Changed is the state of a queue whose rates a Rate call moved.
const Changed State = "changed"

// Rate moves a running queue to new rates (kbit/s; 0 keeps a direction's
// running rate) without tearing its tree down
// (docs/design.md, "Rate changes"): the running tree is planned at the
// rates the kernel holds, must match that plan exactly, and then one tc
// batch of `change` lines (plan.Change) carries it to the plan at the new
// rates, with the values the planner derives from a rate (htb burst and
// quantum, the fq_codel leaf's limit) recomputed. A refused batch is rolled
// back by the reverse change and the kernel read back, so the result says
// what it holds; an accepted batch is trusted, as a start's is. The new
// rates are kept in o.RateDir for status, the doctor and hotplug starts.
// Costs one read of the live tree and one tc -batch.
func Rate(t Target, to config.Rates, by string, o Options) Result {
	r := Result{Section: t.Queue.Section, Device: t.Queue.Interface}
	release, err := o.Locks.acquire(r.Device, false)
	if err != nil {
		r.State, r.Err = Failed, err
		return r
	}
	defer release()
	from, next, err := o.ratePlans(t, to)
	if err != nil {
		r.State, r.Err = Failed, err
		o.log("%s: rate not changed: %v", r.Device, err)
		return r
	}
	r.Plan = next
	for j := range next.Dirs {
		r.Dirs = append(r.Dirs, DirResult{Direction: next.Dirs[j].Direction, Device: next.Dirs[j].Device})
	}
	if o.DryRun != nil {
		lines, _, err := changeLines(from, next)
		if err == nil && len(lines) > 0 {
			r.State = DryRun
			fmt.Fprintf(o.DryRun, "# %s: rate change on %s (%s)\n", next.Section, next.Device, next.Backend)
			writeBatch(o.DryRun, "tc", lines)
			return r
		}
	}
	n, err := o.recorded(from, next, by, func(lines [][]string) error {
		_, err := o.Kernel.Batch("tc", false, lines)
		return err
	})
	switch {
	case err != nil:
		r.State, r.Err = Failed, err
		return r
	case n == 0:
		r.State, r.Err = Skipped, errors.New("already at these rates; nothing changed")
		return r
	}
	r.State = Changed
	o.log("%s: rates changed to %s (%d tc lines, no teardown)", r.Device, describe(next), n)
	return r
}

// recorded is change with its record: the new rates are kept for status,
// the doctor, hotplug and a dead tune's recovery before the kernel moves,
// and a change whose record cannot be written is not made, since a rate
// nothing remembers (a tune's trial at four times the line) could not be
// undone (TestRateNeedsItsRecord). A change that is refused, or moves
// nothing, puts the previous record back.
func (o *Options) recorded(from, next *plan.Plan, by string, send func([][]string) error) (int, error) {
	if o.RateDir == "" {
		return o.change(from, next, send)
	}
	prev, had, _ := ratestate.Load(o.RateDir, next.Device)
	if err := ratestate.Save(o.RateDir, next.Device, ratestate.Rates{Rates: next.Rates(), By: by, At: time.Now().UTC(), Trial: o.Trial}); err != nil {
		return 0, fmt.Errorf("rates not changed: their record could not be written (%w); free %s and try again", err, o.RateDir)
	}
	n, err := o.change(from, next, send)
	if err != nil || n == 0 {
		if had {
			ratestate.Save(o.RateDir, next.Device, prev)
		} else {
			ratestate.Clear(o.RateDir, next.Device)
		}
	}
	return n, err
}

// changeLines are the tc change lines from one plan of a queue to
// another, and the lines back.
func changeLines(from, next *plan.Plan) (fwd, back [][]string, err error) {
	for j := range next.Dirs {
		f, err := plan.Change(from.Dirs[j], next.Dirs[j])
		if err != nil {
			return nil, nil, err
		}
		b, _ := plan.Change(next.Dirs[j], from.Dirs[j])
		fwd, back = append(fwd, f...), append(back, b...)
	}
	return fwd, back, nil
}

// change moves a queue from one plan to the next through send and returns
// the number of lines. The lines before a refused one did apply: the
// reverse of them all runs (a reverse change of a node that was never
// changed is harmless), and the kernel is read back, so the error says
// whether the tree is still the previous plan.
func (o *Options) change(from, next *plan.Plan, send func([][]string) error) (int, error) {
	lines, back, err := changeLines(from, next)
	if err != nil || len(lines) == 0 {
		return 0, err
	}
	if err := send(lines); err != nil {
		o.Kernel.Batch("tc", true, back)
		err = fmt.Errorf("rate change refused, rolled back: %w", err)
		o.log("%s: %v", next.Device, err)
		if bad := o.differs(from); bad != nil {
			err = fmt.Errorf("%w; after the rollback the tree differs from the previous rates (%v): run sqmkit start", err, bad)
		}
		return 0, err
	}
	return len(lines), nil
}

// ratePlans plans the queue at the rates the kernel runs (from) and at the
// new ones (to); from must match the live tree exactly, or the change is
// refused: a tree that differs is a start's job, not a rate change's.
func (o *Options) ratePlans(t Target, to config.Rates) (from, next *plan.Plan, err error) {
	cur, err := o.build(t.Queue, t.Facts)
	if err != nil {
		return nil, nil, err
	}
	s, err := o.Kernel.Read(o.devices(cur.Device, cur.IFB)...)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the live tree: %w", err)
	}
	live, want := t.Queue, t.Queue
	for _, d := range cur.Dirs {
		k, ok := drift.Rate(d, s)
		if !ok {
			return nil, nil, fmt.Errorf("%s %s is not shaped by sqmkit (no %s root); run sqmkit start first", d.Device, d.Direction.Side(), d.Tree[0].Kind)
		}
		live.SetRate(d.Direction, k)
		want.SetRate(d.Direction, k)
	}
	for _, dir := range config.Directions {
		kbit, opt := to.Of(dir), dir.String() // the config's option is named as the direction
		if kbit == 0 {
			continue
		}
		if t.Queue.Rate(dir) == 0 {
			return nil, nil, &config.FieldError{Section: t.Queue.Section, Option: opt, Value: fmt.Sprint(kbit), Why: "this queue does not shape its " + opt, Fix: "set " + opt + " in the config and run sqmkit start"}
		}
		if kbit < 0 {
			return nil, nil, &config.FieldError{Section: t.Queue.Section, Option: opt, Value: fmt.Sprint(kbit), Why: "a rate is a positive number of kbit/s", Fix: "give the new rate in kbit/s, e.g. 35000"}
		}
		want.SetRate(dir, kbit)
	}
	if from, err = o.build(live, t.Facts); err != nil {
		return nil, nil, err
	}
	if bad := drift.Compare(from, s); len(bad) > 0 {
		return nil, nil, fmt.Errorf("the running tree is not the planned one at its own rates (%v); run sqmkit start", bad[0])
	}
	if next, err = o.build(want, t.Facts); err != nil {
		return nil, nil, err
	}
	return from, next, nil
}

// differs reads the queue's devices back and returns the first difference
// from p, or nil.
func (o *Options) differs(p *plan.Plan) error {
	s, err := o.Kernel.Read(o.devices(p.Device, p.IFB)...)
	if err != nil {
		return err
	}
	if d := drift.Compare(p, s); len(d) > 0 {
		return errors.New(d[0].String())
	}
	return nil
}

func describe(p *plan.Plan) string {
	s := ""
	for _, d := range p.Dirs {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %d kbit/s", d.Direction.Side(), d.RateKbit)
	}
	return s
}

// forgetRates drops the rates kept for iface; a failure only costs a note,
// since a later status would report the difference.
func (o *Options) forgetRates(iface string) {
	if err := ratestate.Clear(o.RateDir, iface); err != nil {
		o.log("%s: cannot forget the rates set by sqmkit rate: %v", iface, err)
	}
}

// RecoverTrials puts back the rates a tune found running on each queue
// whose tune died (killed, out of memory) with its trial rates in force,
// the shaper open at several times its rates: a trial whose tune no longer
// holds the queue's job lock is over. Start, status, reload, hotplug,
// LuCI's plugin and the next tune call it first; it returns what it
// restored, one line each, for them to say (TestRecoverDeadTune).
func RecoverTrials(root string, qs []config.Queue, o Options) []string {
	if o.RateDir == "" || o.Jobs == "" {
		return nil
	}
	var said []string
	for _, q := range qs {
		st, ok, err := ratestate.Load(o.RateDir, q.Interface)
		if err != nil || !ok || st.Trial == nil {
			continue
		}
		if _, held := joblock.Held(o.Jobs, joblock.QueueName(q.Interface)); held {
			continue // the tune runs
		}
		ts, err := Targets(root, []config.Queue{q}, "")
		if err != nil {
			continue
		}
		tr := st.Trial
		back := o
		back.Trial = nil
		msg := fmt.Sprintf("%s: the tune started %s (pid %d) ended without putting its rates back (%d/%d kbit/s, a trial)", q.Interface,
			tr.Started.Local().Format("2006-01-02 15:04:05"), tr.PID, st.Download, st.Upload)
		if r := Rate(ts[0], tr.Kept, "sqmkit (after a tune that died)", back); r.State == Failed {
			said = append(said, fmt.Sprintf("%s; putting back %d/%d kbit/s failed: %v (run sqmkit start)", msg, tr.Kept.Download, tr.Kept.Upload, r.Err))
			continue
		}
		if tr.Kept == (config.Rates{Download: q.Download, Upload: q.Upload}) {
			ratestate.Clear(o.RateDir, q.Interface) // the configured rates: nothing to keep
		}
		said = append(said, fmt.Sprintf("%s; put back to %d/%d kbit/s", msg, tr.Kept.Download, tr.Kept.Upload))
	}
	return said
}
