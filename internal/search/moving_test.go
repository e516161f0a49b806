package search

import (
	"context"
	"errors"
	"strings"
	"testing"
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
					if m.FloorKbit <= 0 || m.CeilKbit < m.FloorKbit {
						t.Errorf("%s: bounds %d..%d", m.Kind, m.FloorKbit, m.CeilKbit)
					}
				}
			}
		})
	}
}
