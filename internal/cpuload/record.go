package cpuload

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
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
}

// RecordPath is where section's record lives under root: with the other
// state, in RAM on OpenWrt (/var is /tmp), so a test never writes flash.
func RecordPath(root, section string) string {
	return filepath.Join(root, "var/run/sqmkit/cpu", section+".json")
}

// Save writes r whole (statefile: nothing planted redirects it).
func Save(root string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return statefile.Write(RecordPath(root, r.Section), b, 0o644)
}

// Load reads section's record; ok is false when there is none or it does
// not parse.
func Load(root, section string) (r Record, ok bool) {
	b, err := statefile.Read(RecordPath(root, section), 1<<20, "CPU record")
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
