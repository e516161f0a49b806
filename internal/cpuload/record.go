package cpuload

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Record is the last measurement of a queue's CPU cost (a test run on
// the router, a tune), which doctor, status and LuCI read back: the
// ceiling stays known between tests.
type Record struct {
	Section string              `json:"section"`
	At      time.Time           `json:"at"`
	By      string              `json:"by"` // "test" or "tune"
	Qdisc   string              `json:"qdisc"`
	Phases  []bbresult.PhaseCPU `json:"phases"`
	// Before is the last record of the queue with another qdisc: a user
	// trying cake_mq against cake gets the two compared (doctor).
	Before *Record `json:"before,omitempty"`
}

// RecordPath is where section's record lives under root: with the other
// state, in RAM on OpenWrt (/var is /tmp), so a test never writes flash.
func RecordPath(root, section string) string {
	return filepath.Join(root, "var/run/sqmkit/cpu", section+".json")
}

// Save writes r whole (statefile: nothing planted redirects it), with the
// last record of another qdisc kept as its Before.
func Save(root string, r Record) error {
	r.Before = nil
	if old, ok := Load(root, r.Section); ok {
		if old.Qdisc != r.Qdisc {
			old.Before = nil
			r.Before = &old
		} else {
			r.Before = old.Before
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return statefile.Write(RecordPath(root, r.Section), b, 0o644)
}

// Load reads section's record; ok is false when there is none or it does
// not parse. After a reboot (/var/run empty) it is the copy the router
// keeps on flash (package history), so the ceiling stays known.
func Load(root, section string) (r Record, ok bool) {
	b, err := statefile.Read(RecordPath(root, section), 1<<20, "CPU record")
	if err != nil {
		if h, herr := history.Load(root); herr == nil && h.Queues[section] != nil {
			b, err = h.Queues[section].CPU, nil
		}
	}
	if err != nil || json.Unmarshal(b, &r) != nil || len(r.Phases) == 0 {
		return Record{}, false
	}
	return r, true
}

// Lowest is the phase with the lowest ceiling, and the CPU-bound one at the
// lowest rate when any was bound.
func (r Record) Lowest() bbresult.PhaseCPU {
	low := r.Phases[0]
	for _, c := range r.Phases[1:] {
		if c.Bound && (!low.Bound || c.ShapedMbps < low.ShapedMbps) || !low.Bound && !c.Bound && c.CeilingMbps < low.CeilingMbps {
			low = c
		}
	}
	return low
}

// Ceiling is the rate in Mbit/s this record says the router shapes: the
// lowest CPU-bound phase's, else the lowest implied ceiling.
func (r Record) Ceiling() float64 {
	low := r.Lowest()
	if low.Bound {
		return low.ShapedMbps
	}
	return low.CeilingMbps
}

// MsPerMbit is the mean CPU time per shaped Mbit of the record's phases.
func (r Record) MsPerMbit() float64 {
	var sum float64
	for _, p := range r.Phases {
		sum += p.MsPerMbit
	}
	return sum / float64(len(r.Phases))
}
