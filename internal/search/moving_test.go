package search

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
)

// TestMovingLine: a line whose seconds swing (T-Mobile's LTE download,
// twelve seconds of the mahimahi recording), or that falls under the
// shaper between the search's steps, is not searched to one rate: tune says it
// moves and gives autorate's bounds; steady lines, a boost and a slow
// link's clumped seconds are searched as before (TestSearch, TestLineSeries).
func TestMovingLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*sim)
		why   string // "": not moving
	}{
		{"steady", func(*sim) {}, ""},
		{"a boost", func(s *sim) { s.boost, s.boostSecs = 1.2, 4 }, ""},
		{"seconds that swing", func(s *sim) {
			s.series = []int{6900, 7308, 10008, 13500, 17892, 4788, 7404, 18132, 14448, 12996, 18852, 8832}
		}, "seconds carried from 7404 to 18132"},
		{"the link falls under the shaper", func(s *sim) { s.moves = []float64{1, 1, 0.5, 0.5} }, "of what that rate carries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim()
			tc.setup(s)
			_, err := Search(context.Background(), s, searchConfig())
			var me *MovingError
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("a line that does not move: %v", err)
			case tc.why == "":
			case !errors.As(err, &me) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "autorate_min_") || !strings.Contains(err.Error(), "nothing was written"):
				t.Fatalf("err %v, want a MovingError naming %q and autorate's bounds", err, tc.why)
			default:
				for _, m := range me.Dirs {
					if m.FloorKbit < config.MinRateKbit || m.CeilKbit < m.FloorKbit {
						t.Errorf("%s: bounds %d..%d", m.Kind, m.FloorKbit, m.CeilKbit)
					}
				}
			}
		})
	}
}

// TestWithoutStalls: a steady cable line with the shaper open (the lab's
// tune over IPv6) had three stalls, each followed by its catch-up; merged,
// its seconds stay within a tenth, and a swinging line's are left alone.
func TestWithoutStalls(t *testing.T) {
	cable := []int{35374, 37480, 37492, 37477, 37489, 37484, 37471, 37501, 37486, 21178, 53806, 37578, 37400, 37480, 37514,
		37474, 37457, 37463, 37540, 37463, 37459, 32686, 42247, 37456, 37487, 37484, 37501, 23120, 51664, 37487}
	got := slices.Sorted(slices.Values(withoutStalls(slices.Clone(cable))))
	if lo, hi := got[1], got[len(got)-2]; float64(hi) > 1.1*float64(lo) {
		t.Errorf("cable's seconds still spread %d..%d: %v", lo, hi, got)
	}
	swing := []int{10008, 13500, 17892, 4788, 7404, 18132, 14448, 12996, 18852}
	if got := withoutStalls(slices.Clone(swing)); !slices.Equal(got, swing) {
		t.Errorf("a swinging line's seconds changed: %v", got)
	}
}
