// Package applied keeps a record of what each start applied: the device,
// its IFB and whether sqmkit created that IFB, the backend and the
// section. Stop, reload and hotplug act on these records, not on the
// configuration as it is now, so a queue moved to another interface, a
// script or backend changed, or a section deleted is still removed from
// where it was applied, and a device sqmkit did not create is never
// deleted (docs/design.md, "What a start leaves behind").
//
// The records live on the runtime tmpfs (DIR/var/run under --root), one
// small JSON file per device, so a reboot forgets them with the trees they
// describe.
package applied

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Dir is where the records live under a root ("/" on a router).
func Dir(root string) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "var/run/sqmkit/applied")
}

// Record is what one start left on one device.
type Record struct {
	Section string `json:"section"`
	Device  string `json:"device"`
	Backend string `json:"backend"`
	// IFB is the device the download was redirected to; "" when ingress
	// was not shaped.
	IFB string `json:"ifb,omitempty"`
	// IFBCreated: sqmkit created the IFB (ifindex IFBIndex), so a stop may
	// delete it; an IFB that was there before is only emptied.
	IFBCreated bool `json:"ifb_created,omitempty"`
	IFBIndex   int  `json:"ifb_index,omitempty"`
	Egress     bool `json:"egress"`
	Ingress    bool `json:"ingress"`
	// PlainCake says why the start shaped with plain cake where use_mq
	// asked for cake_mq (tc or the kernel refused it): status, hotplug
	// and rate changes plan what it applied; a start tries cake_mq again.
	PlainCake string `json:"plain_cake,omitempty"`
	// Script is sqm-scripts' script the section named, for the log.
	Script string    `json:"script,omitempty"`
	At     time.Time `json:"at"`
	// Pending: written before the start changed the kernel (write-ahead),
	// naming everything it may leave; the start's end replaces it with
	// what it did. Found alone, its start died on the way.
	Pending bool `json:"pending,omitempty"`
}

// Store reads and writes the records in one directory. The zero Store
// (Dir "") keeps nothing: a test that owns its kernel, a dry run.
type Store struct{ Dir string }

// maxRecord caps a record file: a few hundred bytes when sqmkit wrote it.
const maxRecord = 64 << 10

func (s Store) path(dev string) string { return filepath.Join(s.Dir, dev+".json") }

// Get returns the record of dev; ok is false when there is none.
func (s Store) Get(dev string) (r Record, ok bool, err error) {
	if s.Dir == "" {
		return r, false, nil
	}
	b, err := statefile.Read(s.path(dev), maxRecord, "sqmkit record")
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err == nil && r.Device != dev {
		err = fmt.Errorf("it names device %q", r.Device)
	}
	if err != nil {
		return r, false, fmt.Errorf("record of %s: %w (remove %s; sqmkit then removes only what the configuration names)", dev, err, s.path(dev))
	}
	return r, true, nil
}

// All returns every record, by device name. A record that cannot be read
// is reported in the error and skipped; the others are returned beside
// it, so one bad file never stops the rest from being acted on
// (TestAllSkipsBadRecord).
func (s Store) All() ([]Record, error) {
	if s.Dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	var bad []error
	for _, e := range ents {
		dev, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || strings.HasPrefix(dev, ".") {
			continue
		}
		r, ok, err := s.Get(dev)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out, errors.Join(bad...)
}

// Put writes r whole (a rename, so a reader never sees half a record).
func (s Store) Put(r Record) error {
	if s.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return statefile.Write(s.path(r.Device), b, 0o644)
}

// Delete forgets dev's record.
func (s Store) Delete(dev string) error {
	if s.Dir == "" {
		return nil
	}
	if err := os.Remove(s.path(dev)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
