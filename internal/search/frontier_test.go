package search

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// A bidirectional delay that does not fall as the rates come down (a
// floor the shaper does not hold: the sim's bidirExtra) keeps the highest
// rates that read it and judges the bidirectional phase against A: the
// one-way rates when it is there from the first miss, the rates a queue's
// lowering reached when one sits on top of it. Over A too, no rate is
// chosen. A queue that shrinks with the rate (TestBidirLowers) is lowered
// as before.
func TestBidirFlat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*sim)
		extra   float64
		wantErr bool
	}{
		{"a floor from the first miss", func(s *sim) { s.flat = true }, 5.5, false},
		{"a noisy floor from the first miss", func(s *sim) { s.flat, s.noiseMs = true, 0.7 }, 5.5, false},
		{"a queue, then a floor", func(s *sim) {}, 5.5, false},
		{"a floor over A", func(s *sim) {}, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneWay := newSim()
			tc.setup(oneWay)
			want, err := Search(context.Background(), oneWay, searchConfig())
			if err != nil || want.BidirLowered != 0 {
				t.Fatalf("without the floor: lowered %d, %v", want.BidirLowered, err)
			}
			s := newSim()
			tc.setup(s)
			s.bidirExtra = tc.extra
			r, err := Search(context.Background(), s, searchConfig())
			var bidirs []Step
			for _, st := range r.Steps {
				if st.Kind == Bidir {
					bidirs = append(bidirs, st)
				}
			}
			if len(bidirs) > 4 {
				t.Errorf("%d bidirectional phases on a flat frontier, want at most 4", len(bidirs))
			}
			if tc.wantErr {
				if !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "did not fall") {
					t.Errorf("a floor over A: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// the highest rates whose phase read the floor, within
			// flatDelay of the lowest miss
			low := slices.MinFunc(bidirs, func(a, b Step) int { return cmp.Compare(a.AddedMedian, b.AddedMedian) })
			at := slices.IndexFunc(bidirs, func(st Step) bool { return flatDelay*st.AddedMedian <= low.AddedMedian })
			if r.Download.RateKbit != bidirs[at].RateKbit || r.Upload.RateKbit != bidirs[at].Other {
				t.Errorf("rates %d/%d, want %d/%d, the first to read the floor: %+v", r.Download.RateKbit, r.Upload.RateKbit, bidirs[at].RateKbit, bidirs[at].Other, bidirs)
			}
			if at == 0 && (r.Download.RateKbit != want.Download.RateKbit || r.Upload.RateKbit != want.Upload.RateKbit) {
				t.Errorf("rates %d/%d, want the one-way searches' %d/%d", r.Download.RateKbit, r.Upload.RateKbit, want.Download.RateKbit, want.Upload.RateKbit)
			}
			if r.BidirTarget != A || !strings.Contains(r.BidirOutOfReach, "did not fall") || r.TargetOf(Bidir) != A || r.TargetOf(Download) != APlus {
				t.Errorf("bidirectional judged against %+v (%q), download against %+v", r.TargetOf(Bidir), r.BidirOutOfReach, r.TargetOf(Download))
			}
			if !r.Download.Has(RuleFlatFrontier) {
				t.Errorf("download: %s", r.Download.Why)
			}
			if s.rateD != float64(r.Download.RateKbit) || s.rateU != float64(r.Upload.RateKbit) {
				t.Errorf("the link is at %v/%v, the report says %d/%d", s.rateD, s.rateU, r.Download.RateKbit, r.Upload.RateKbit)
			}
		})
	}
}
