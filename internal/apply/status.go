package apply

import (
	"fmt"

	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Status is the kernel's view of one queue next to its plan.
type Status struct {
	Section string
	Plan    *plan.Plan
	Live    *tcstats.Snapshot
	Devices []string     // the queue's devices that exist; Live holds their records
	Diffs   []drift.Diff // shape and values; none when shaped as planned
	Err     error
}

// Matches reports a queue shaped exactly as planned.
func (s Status) Matches() bool { return s.Err == nil && len(s.Diffs) == 0 }

// Inspect reads what each queue's devices hold and compares it to the plan.
func Inspect(ts []Target, o Options) []Status {
	out := make([]Status, len(ts))
	for i, t := range ts {
		s := &out[i]
		s.Section = t.Queue.Section
		if s.Plan, s.Err = o.build(t.Queue, t.Facts); s.Err != nil {
			continue
		}
		if s.Devices = o.devices(s.Plan.Device, s.Plan.IFB); len(s.Devices) == 0 {
			s.Err = fmt.Errorf("device %s does not exist", s.Plan.Device)
			continue
		}
		if s.Live, s.Err = o.Kernel.Read(s.Devices...); s.Err != nil {
			continue
		}
		s.Diffs = drift.Compare(s.Plan, s.Live)
	}
	return out
}
