// Package ratestate remembers the rates a running queue was changed to
// without a restart (`sqmkit rate`, tune, autorate), apart from its
// configuration. Status, the doctor and a hotplug start plan with them, so
// a queue that autorate keeps at 31 Mbit/s reads as shaped as intended,
// and an interface event does not tear its tree down to restore the
// configured 38 Mbit/s. A full start or a stop forgets them: the config is
// the truth again.
//
// The state lives on the runtime tmpfs (/var/run), one small JSON file per
// interface, so a reboot forgets it with the trees it described.
package ratestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/statefile"

	"github.com/sqmkit/sqmkit/internal/config"
)

// DefaultDir is where the state lives on a router.
const DefaultDir = "/var/run/sqmkit/rate"

// Rates are a queue's current rates, kbit/s (0 keeps the configured one),
// and who set them when.
type Rates struct {
	config.Rates
	By string    `json:"by"` // "sqmkit rate", "sqmkit tune", "sqmkit autorate"
	At time.Time `json:"at"`
	// Trial: the rates are a tune's trial (it opens the shaper to 4× to
	// measure the line), never rates to keep; Kept are the rates to go
	// back to when the tune is gone (apply.RecoverTrials).
	Trial *Trial `json:"trial,omitempty"`
}

// Trial is a tune in progress: what it found running, who it is.
type Trial struct {
	Kept    config.Rates `json:"kept"`
	PID     int          `json:"pid"`
	Started time.Time    `json:"started"`
}

func path(dir, iface string) string { return filepath.Join(dir, iface+".json") }

// Load returns iface's rates; ok is false when none are kept.
func Load(dir, iface string) (r Rates, ok bool, err error) {
	if dir == "" {
		return r, false, nil
	}
	b, err := statefile.Read(path(dir, iface), 4096, "rate state")
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return r, false, fmt.Errorf("rate state of %s: %w (remove %s or run sqmkit start)", iface, err, path(dir, iface))
	}
	return r, true, nil
}

// Save keeps iface's rates, replacing the file whole.
func Save(dir, iface string, r Rates) error {
	b, _ := json.Marshal(r) // statefile.Write makes dir
	return statefile.Write(path(dir, iface), b, 0o644)
}

// Clear forgets iface's rates.
func Clear(dir, iface string) error {
	if dir == "" {
		return nil
	}
	if err := os.Remove(path(dir, iface)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Apply puts iface's kept rates into q, with a note saying so, and
// reports whether there were any. Only a direction the config shapes takes
// one: a rate change never starts shaping a direction.
func Apply(dir string, q *config.Queue) (bool, error) {
	r, ok, err := Load(dir, q.Interface)
	if !ok || err != nil {
		return false, err
	}
	applied := false
	if r.Download > 0 && q.Download > 0 && r.Download != q.Download {
		q.Notes = append(q.Notes, fmt.Sprintf("download %d kbit/s set by %s at %s (config %d)", r.Download, r.By, r.At.Format(time.RFC3339), q.Download))
		q.Download, applied = r.Download, true
	}
	if r.Upload > 0 && q.Upload > 0 && r.Upload != q.Upload {
		q.Notes = append(q.Notes, fmt.Sprintf("upload %d kbit/s set by %s at %s (config %d)", r.Upload, r.By, r.At.Format(time.RFC3339), q.Upload))
		q.Upload, applied = r.Upload, true
	}
	return applied, nil
}
