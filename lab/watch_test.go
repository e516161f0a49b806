package main

import (
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/history"
	"github.com/sqmkit/sqmkit/internal/watch"
)

// TestWatchChecks: a steady line passes only with no finding over its
// minutes; a change passes only when named, and in time.
func TestWatchChecks(t *testing.T) {
	minutes := make([]watch.Minute, int(watchSteady/time.Minute))
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
		{"steady, cut short", "steady", watch.Status{Minutes: minutes[:2]}, 0, false},
		{"falls, named", "falls", watch.Status{Findings: found}, 4 * time.Minute, true},
		{"falls, never named", "falls", watch.Status{}, 0, false},
		{"falls, named too late", "falls", watch.Status{Findings: found}, watchNamed + time.Second, false},
	} {
		cs := watchChecks(tc.variant, tc.st, "bloat-back-download", tc.named, watchSteady)
		if len(cs) != 1 || cs[0].OK != tc.ok {
			t.Errorf("%s: %+v, want ok %v", tc.name, cs, tc.ok)
		}
	}
}
