package main

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/watch"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// TestWatchChecks: a steady line passes only with no finding and enough
// loaded minutes to have judged; a change passes only when named, in time.
func TestWatchChecks(t *testing.T) {
	// a 6-minute window: four minutes of a loaded download, two idle
	minutes := make([]watch.Minute, int(watchWindow/time.Minute))
	for i := range 4 {
		minutes[i].Load = [2]float64{0.9, 0.1}
	}
	idle := make([]watch.Minute, len(minutes))
	found := []history.Finding{{ID: "bloat-back-download"}}
	for _, tc := range []struct {
		name    string
		variant string
		st      watch.Status
		named   time.Duration
		ok      bool
	}{
		{"steady, silent", "steady", watch.Status{Minutes: minutes}, 0, true},
		{"steady, a finding", "steady", watch.Status{Minutes: minutes, Findings: found}, 0, false},
		{"steady, too little load to judge", "steady", watch.Status{Minutes: minutes[:2]}, 0, false},
		{"steady, never loaded", "steady", watch.Status{Minutes: idle}, 0, false},
		{"falls, named", "falls", watch.Status{Findings: found}, 4 * time.Minute, true},
		{"falls, never named", "falls", watch.Status{}, 0, false},
		{"falls, named too late", "falls", watch.Status{Findings: found}, watchNamed + time.Second, false},
	} {
		cs := watchChecks(tc.variant, tc.st, "bloat-back-download", tc.named, watchSteady)
		if ok := !slices.ContainsFunc(cs, func(c accept.Check) bool { return !c.OK }); len(cs) == 0 || ok != tc.ok {
			t.Errorf("%s: %+v, want ok %v", tc.name, cs, tc.ok)
		}
	}
}

// TestWatchCPU: the watch's CPU is read from its /proc stat and judged as
// a share of one core over the time it ran.
func TestWatchCPU(t *testing.T) {
	if c := watchCPU(os.Getpid(), 1000*time.Hour); !c.OK || c.Got < 0 {
		t.Errorf("this test over 1000 h: %+v", c)
	}
	// spin until the kernel has charged this process a tick (however busy
	// the host, within a generous deadline)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		if c := watchCPU(os.Getpid(), time.Hour); c.Got > 0 {
			break
		}
	}
	if c := watchCPU(os.Getpid(), time.Nanosecond); c.OK {
		t.Errorf("this test's CPU over 1 ns: %+v, want over 1 %%", c)
	}
	if c := watchCPU(-1, time.Minute); c.OK {
		t.Errorf("no such process: %+v", c)
	}
}
