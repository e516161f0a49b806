package rpcd

import (
	"github.com/sqmkit/sqmkit/internal/autorate"
)

// autorateSection is one section with autorate and what its daemon shows.
type autorateSection struct {
	Section   string           `json:"section"`
	Interface string           `json:"interface"`
	Running   bool             `json:"running"` // its status file is fresh
	Status    *autorate.Status `json:"status,omitempty"`
}

// stale: a status file older than this belongs to a daemon that stopped.
const staleStatus = 30 // seconds

// autorate lists the enabled sections with option autorate '1' and each
// one's status file (autorate.StatusPath).
func (e *Env) autorate(map[string]any) (any, error) {
	ts, _, err := e.queues()
	if err != nil {
		return nil, err
	}
	out := []autorateSection{}
	for _, t := range ts {
		q := t.Queue
		if !q.Autorate {
			continue
		}
		s := autorateSection{Section: q.Section, Interface: q.Interface}
		var st autorate.Status
		if readJSON(autorate.StatusPath(e.Root, q.Section), &st) == nil {
			s.Status = &st
			s.Running = e.Now().Sub(st.At).Seconds() < staleStatus
		}
		out = append(out, s)
	}
	return map[string]any{"sections": out}, nil
}
