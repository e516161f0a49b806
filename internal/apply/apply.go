// Package apply starts, stops and inspects SQM queues on the live kernel.
// Every change goes through whole tc/ip batches, so a warm start costs at
// most four processes, and each direction ends either fully shaped or with
// no qdisc: a download redirect never points at an unshaped IFB
// (docs/design.md, "Applying"). The kernel sits behind the Kernel interface,
// so every rollback path is tested without root (package tcfake).
//
// The files: start.go (start and its rollback), probe.go (validation in a
// throwaway namespace and the ECN retry), reconcile.go (a hotplug start
// changes only what differs from the plan), rate.go (new rates without a
// teardown), stop.go, status.go, dryrun.go, lock.go (one change per
// interface at a time).
package apply

import (
	"fmt"
	"io"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
)

// Target is one queue to act on and the facts about its device.
type Target struct {
	Queue config.Queue
	Facts linkinfo.Facts
}

// Options configure Start, Stop and Inspect.
type Options struct {
	Kernel Kernel // required
	Prober Prober // nil skips probing; batches then rely on rollback alone
	// Build plans a queue; nil means plan.Build. Start calls it again with
	// ECN off when tc refuses the ecn keyword.
	Build func(config.Queue, linkinfo.Facts) (*plan.Plan, error)
	// Hotplug: started by an interface event. The live tree is compared
	// with the plan first and only what differs is changed; a direction
	// already as planned, a shaped IFB above all, is left alone.
	Hotplug bool
	DryRun  io.Writer // non-nil: write what would run there and touch nothing
	// Uninstall: a stop that leaves nothing of sqmkit's, the IFBs it made
	// for nss included (which a stop otherwise keeps).
	Uninstall bool
	// Jobs is the directory of the per-queue job locks (joblock.QueueDir;
	// "": none): a follower's change takes its queue's for the change and
	// pauses while a test or a tune holds it.
	Jobs string
	// Trial, set by a tune, marks the rates it changes as its trial's:
	// kept with what to go back to when the tune is gone.
	Trial *ratestate.Trial
	Log   func(string)
	Locks *Locks // nil: no locking (a test that owns its kernel)
	// RateDir keeps the rates a Rate call set (ratestate.DefaultDir on a
	// router); a full start and a stop forget them. "": nothing is kept.
	RateDir string
	// Records keeps what each start applied (applied.Dir under the root on
	// a router); stop, reload and hotplug act on it. The zero Store keeps
	// nothing, and a stop then removes only qdiscs sqmkit builds.
	Records applied.Store
}

// State is the outcome for one queue.
type State string

const (
	Started State = "started" // every shaped direction applied
	Partial State = "partial" // one direction applied, the other failed
	Failed  State = "failed"
	Waiting State = "waiting" // device has no address yet; hotplug will start it
	Skipped State = "skipped" // hotplug: already shaped as planned, or another start is pending
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
	// Done lists, for a stop, what was removed ("" entries never appear).
	Done []string

	createdIFB int // ifindex of the IFB this start created, 0 if none
}

// DirResult reports one direction.
type DirResult struct {
	Direction config.Direction
	Device    string
	Err       error // nil: shaped as planned; otherwise see NotStarted and Left
	// NotStarted: Err came from validation and the direction was not
	// touched (it keeps its previous state).
	NotStarted bool
	// Kept: a hotplug start found the direction as planned and left it.
	Kept bool
	// Unchanged: tc did not run at all (not installed, a batch it cannot
	// carry), so the direction holds what it held before the start.
	Unchanged bool
	// Left is what the kernel still holds of a failed direction after its
	// rollback, read back from the kernel; empty means no qdisc is left.
	Left     []string
	Warnings []string // e.g. ECN dropped because tc refused it
	// PlainCake: tc or the kernel refused cake_mq, and the direction was
	// shaped with plain cake for this reason.
	PlainCake string
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

func (o *Options) log(format string, a ...any) {
	if o.Log != nil {
		o.Log(fmt.Sprintf(format, a...))
	}
}

// build plans q as its last start applied it: plain cake where that start
// found no cake_mq (applied.Record.PlainCake), so status, hotplug and rate
// changes agree with the kernel. A start plans afresh (fresh).
func (o *Options) build(q config.Queue, f linkinfo.Facts) (*plan.Plan, error) {
	if q.UseMQ {
		if rec, ok, _ := o.Records.Get(q.Interface); ok && rec.PlainCake != "" {
			q.UseMQ = false
			q.Notes = append(q.Notes, "use_mq: the last start shaped with plain cake: "+rec.PlainCake)
		}
	}
	return o.fresh(q, f)
}

// fresh plans q from its configuration alone.
func (o *Options) fresh(q config.Queue, f linkinfo.Facts) (*plan.Plan, error) {
	if o.Build != nil {
		return o.Build(q, f)
	}
	return plan.Build(q, f)
}

// Targets reads the device facts of each queue under root and, from
// keptDir ("" for none), the rates sqmkit rate set since the last start.
func Targets(root string, qs []config.Queue, keptDir string) ([]Target, error) {
	var ts []Target
	for _, q := range qs {
		f, err := linkinfo.Read(root, q.Interface)
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", q.Section, err)
		}
		if _, err := ratestate.Apply(keptDir, &q); err != nil {
			return nil, err
		}
		ts = append(ts, Target{Queue: q, Facts: f})
	}
	return ts, nil
}
