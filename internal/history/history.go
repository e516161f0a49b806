// Package history is what the router learns about its line and keeps
// across reboots, on flash: each queue's grades (a test on the router, a
// tune's confirming test, the watch's scheduled check), the line rates
// measured, the rates tune wrote, the CPU record (the ceiling the doctor
// reads) and the watch's findings. Everything else sqmkit keeps lives in
// /var/run and is gone at a reboot; this file is read back at boot by
// whatever needs it (cpuload.Load, the doctor, LuCI's status page).
//
// Flash wears with writes, so the file is small (at most MaxEntries
// grades a queue, a few kB in all) and written at most once per test or
// tune, and once a day for the watch's findings (Budget).
package history

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Path is the file under root: /etc is OpenWrt's overlay on flash (and on
// a Linux box, with the configuration it describes).
func Path(root string) string { return filepath.Join(root, "etc", "sqmkit", "history.json") }

// MaxEntries is how many grades a queue keeps: a year of weekly checks.
const MaxEntries = 52

// Budget is the most the watch writes: one write a day (a test or a tune
// adds one each, as the user starts them).
const Budget = 24 * time.Hour

// History is the file: each queue's record by section.
type History struct {
	Queues map[string]*Queue `json:"queues"`
	// Written is when the file was last written, for the watch's budget.
	Written time.Time `json:"written"`
}

// Queue is one queue's record.
type Queue struct {
	Grades []Entry `json:"grades,omitempty"`
	// Tuned is the last rates tune wrote, and the line it measured then.
	Tuned *Tuned `json:"tuned,omitempty"`
	// CPU is the last CPU record (package cpuload's, kept as it wrote it).
	CPU json.RawMessage `json:"cpu,omitempty"`
	// Findings are the watch's, as it last judged the line.
	Findings []Finding `json:"findings,omitempty"`
}

// Entry is one graded test.
type Entry struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"`    // "test", "tune", "watch"
	Grade string    `json:"grade"` // DSLReports' letter
	// AddedMs is the grade's figure; Down and Up the rates the shaper ran
	// at (kbit/s); LineDown and LineUp the line measured with the shaper
	// open, when it was (a tune, the watch's check).
	AddedMs  float64 `json:"added_ms"`
	Down     int     `json:"down_kbit,omitempty"`
	Up       int     `json:"up_kbit,omitempty"`
	LineDown int     `json:"line_down_kbit,omitempty"`
	LineUp   int     `json:"line_up_kbit,omitempty"`
	Server   string  `json:"server,omitempty"`
}

// Tuned is what a tune wrote.
type Tuned struct {
	At       time.Time `json:"at"`
	Down     int       `json:"down_kbit"`
	Up       int       `json:"up_kbit"`
	LineDown int       `json:"line_down_kbit"`
	LineUp   int       `json:"line_up_kbit"`
	OldDown  int       `json:"old_down_kbit,omitempty"`
	OldUp    int       `json:"old_up_kbit,omitempty"`
}

// Finding is one of the watch's verdicts on the line.
type Finding struct {
	ID       string    `json:"id"`
	Since    time.Time `json:"since"`
	Severity string    `json:"severity"` // "warn"
	Subject  string    `json:"subject"`  // the direction, or the line
	Evidence string    `json:"evidence"`
	Fix      string    `json:"fix"`
}

// Load reads root's history; none is an empty one.
func Load(root string) (*History, error) {
	h := &History{Queues: map[string]*Queue{}}
	b, err := statefile.Read(Path(root), 256<<10, "history")
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err == nil {
		err = json.Unmarshal(b, h)
	}
	if err != nil {
		return &History{Queues: map[string]*Queue{}}, err
	}
	if h.Queues == nil {
		h.Queues = map[string]*Queue{}
	}
	return h, nil
}

// Queue is section's record, made when it has none.
func (h *History) Queue(section string) *Queue {
	q := h.Queues[section]
	if q == nil {
		q = &Queue{}
		h.Queues[section] = q
	}
	return q
}

// Save writes h whole at now.
func (h *History) Save(root string, now time.Time) error {
	h.Written = now.UTC()
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return statefile.Write(Path(root), b, 0o644)
}

// Update reads root's history, lets change edit it and writes it back: one
// write (TestOneWriteEach). A history that does not parse is started again
// rather than left to block every later record.
func Update(root string, now time.Time, change func(*History)) error {
	h, _ := Load(root)
	change(h)
	return h.Save(root, now)
}

// Add appends e to q's grades, the oldest beyond MaxEntries dropped.
func (q *Queue) Add(e Entry) {
	q.Grades = append(q.Grades, e)
	if n := len(q.Grades) - MaxEntries; n > 0 {
		q.Grades = append([]Entry(nil), q.Grades[n:]...)
	}
}

// Last is q's newest grade by who ("" any), and whether it has one.
func (q *Queue) Last(by string) (Entry, bool) {
	for i := len(q.Grades) - 1; i >= 0; i-- {
		if by == "" || q.Grades[i].By == by {
			return q.Grades[i], true
		}
	}
	return Entry{}, false
}
