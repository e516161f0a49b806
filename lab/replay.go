package main

import (
	"fmt"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/lab/internal/linkemu"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
	"github.com/sqmkit/sqmkit/lab/internal/trace"
)

// The trace's player on the modem (sqmkit-lab replay), and how a
// recording sits there.

// recordedSlot is a recording's slot on the modem: the modem's tbf and
// plug change every 10 ms (what the guest's timers hold: replay's log
// counts the slots it ran late), each slot's opportunities delivered as
// its first moment allows (linkemu.Slot).
const recordedSlot = 10 * time.Millisecond

// loadTrace reads run's trace (a recording in slots of its SlotMs) and
// keeps its first Seconds.
func loadTrace(path string, seconds, slotMs int) (*trace.Trace, error) {
	slot := recordedSlot
	if slotMs > 0 {
		slot = time.Duration(slotMs) * time.Millisecond
	}
	tr, err := trace.Load(path, slot)
	if err != nil {
		return nil, err
	}
	tr.Cut(time.Duration(seconds) * time.Second)
	return tr, nil
}

// recordedLimit is the modem's buffer on a recording, in bytes per
// direction: the profile's buffer time at the recording's mean rate
// (a buffer at its highest, a moment's burst, would hold seconds more).
func recordedLimit(p *profile.Profile, tr *trace.Trace) [2]int {
	var l [2]int
	for d, v := range [2][]int{tr.Down, tr.Up} {
		_, mean, _ := trace.Stats(v)
		l[d] = max(mean/8*p.BufferMs, 4*linkemu.Frame(p))
	}
	return l
}

// replay is `sqmkit-lab replay PROFILE TRACE SECONDS SLOT_MS` in the
// modem namespace: the modem follows the trace, one change per step,
// through one long-lived tc, on an absolute schedule (a late change does
// not delay the next ones), and says how many steps it ran late. A
// generated trace moves the tbf's rate (linkemu.Change); a recording's
// slots set the tbf's bucket and the plug (linkemu.Slot).
func replay(profilePath, tracePath string, seconds, slotMs int) error {
	p, err := profile.Load("", profilePath)
	if err != nil {
		return err
	}
	tr, err := loadTrace(tracePath, seconds, slotMs)
	if err != nil {
		return err
	}
	// the profile's rates are the trace's highest (traceRuns)
	_, _, p.Down = trace.Stats(tr.Down)
	_, _, p.Up = trace.Stats(tr.Up)
	s, err := (&tc.Runner{}).Stream("tc")
	if err != nil {
		return err
	}
	defer s.Close()
	step := stepper(p, tr)
	t0 := time.Now().Add(traceIdle)
	late := 0
	for i := range tr.Down {
		at := t0.Add(time.Duration(i) * tr.Step)
		time.Sleep(time.Until(at))
		if time.Since(at) > tr.Step/2 {
			late++
		}
		if lines := step(i); len(lines) > 0 {
			if err := s.Send(lines); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
	}
	fmt.Printf("replayed %d steps of %v of %s (%s), %d of them more than %v late\n", len(tr.Down), tr.Step, tr.Name, tr.Kind, late, tr.Step/2)
	return nil
}

// stepper is the tc lines of each step of tr on profile p's modem.
func stepper(p *profile.Profile, tr *trace.Trace) func(i int) [][]string {
	if !tr.Recorded() {
		return func(i int) [][]string {
			return [][]string{linkemu.Change(p, "m0", config.Download, tr.Down[i]), linkemu.Change(p, "m1", config.Upload, tr.Up[i])}
		}
	}
	limit, frame := recordedLimit(p, tr), linkemu.Frame(p)
	var blocked [2]bool
	ms := int(tr.Step / time.Millisecond)
	return func(i int) [][]string {
		var lines [][]string
		for d, dev := range []string{"m0", "m1"} {
			kbit := [2]int{tr.Down[i], tr.Up[i]}[d]
			l, b := linkemu.Slot(dev, kbit*ms/8/trace.Opportunity, frame, blocked[d], limit[d])
			lines, blocked[d] = append(lines, l...), b
		}
		return lines
	}
}
