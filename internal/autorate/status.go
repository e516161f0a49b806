package autorate

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/statefile"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Status is what a running autorate shows in its status file, for LuCI's
// autorate page (sqmkit rpcd): its bounds, what it set and carried last,
// and the last minutes of it.
type Status struct {
	At             time.Time `json:"at"`
	Min, Base, Max [2]int    `json:",omitempty"` // kbit/s, download and upload
	Rate, Load     [2]int
	State          [2]string
	History        []Point `json:"history"`
}

// Point is one moment of the history: the rates set, the load carried
// (kbit/s, download and upload) and each probe path's added delay (ms).
type Point struct {
	T     int64              `json:"t"` // unix seconds
	Rate  [2]int             `json:"rate"`
	Load  [2]int             `json:"load"`
	Added map[string]float64 `json:"added_ms"`
}

// Status file cadence: a point every statusEvery, historyPoints of them
// (ten minutes), so a page that opens sees the last minutes at once and
// a router's flash is never written (the file lives under /var/run).
const (
	statusEvery   = 5 * time.Second
	historyPoints = 120
)

// StatusPath is where the autorate of section keeps its status under root.
func StatusPath(root, section string) string {
	return filepath.Join(root, "var/run/sqmkit/autorate", section+".json")
}

// snapshot copies the metrics' latest added delays.
func (m *Metrics) snapshot() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]float64, len(m.added))
	for p, v := range m.added {
		out[p] = v
	}
	return out
}

// record adds a point to st and writes the status file in one rename, so
// a reader never sees half of it (TestStatusFile).
func (d *Daemon) record(st *Status, c *Controller, load [2]int, now time.Time) error {
	p := Point{T: now.Unix(), Load: load, Added: d.Metrics.snapshot()}
	for dir := range 2 {
		p.Rate[dir] = c.Rate(config.Direction(dir))
		st.State[dir] = string(c.State(config.Direction(dir)))
	}
	st.At, st.Rate, st.Load = now.UTC(), p.Rate, load
	st.Min, st.Base, st.Max = d.Params.Min, d.Params.Base, d.Params.Max
	st.History = append(st.History, p)
	if n := len(st.History); n > historyPoints {
		st.History = append(st.History[:0], st.History[n-historyPoints:]...)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return statefile.Write(d.StatusFile, b, 0o644)
}
