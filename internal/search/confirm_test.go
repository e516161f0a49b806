package search

import (
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// A confirming test's miss by a little (a step's worth to the search)
// lowers, once, the direction whose queue it was by BidirStep; a larger
// miss or a second one is refused, and a lowering with no room to confirm
// it again says so in its rules.
func TestLowerAfterConfirm(t *testing.T) {
	for _, c := range []struct {
		name         string
		k            Kind
		p            Phase
		lowered      int // ConfirmLowered before
		confirmAgain bool
		ok           bool
		down, up     int // rates after
	}{
		{"download by a little", Download, Phase{AddedMedian: 5.5, AddedP95: 9}, 0, true, true, 9800, 2000},
		{"upload by a little", Upload, Phase{AddedMedian: 5.5, AddedP95: 9}, 0, true, true, 10000, 1960},
		// under half a bar over: one step
		{"p95 under half a bar over", Upload, Phase{AddedMedian: 3, AddedP95: 22}, 0, true, true, 10000, 1960},
		{"twice the bar", Download, Phase{AddedMedian: 10, AddedP95: 12}, 0, true, false, 10000, 2000},
		{"a second miss", Download, Phase{AddedMedian: 5.5, AddedP95: 9}, 1, true, false, 10000, 2000},
		// the bidirectional phase's queue was the upload's (its one-way
		// delay over the bar beside a download under it)
		{"bidirectional, the upload's queue", Bidir, Phase{AddedMedian: 5.5, AddedP95: 9, AddedDown: 0.5, AddedUp: 5}, 0, true, true, 10000, 1960},
		{"bidirectional, both queues", Bidir, Phase{AddedMedian: 12, AddedP95: 14, AddedDown: 11, AddedUp: 11}, 0, true, false, 10000, 2000},
		{"bidirectional, both by a little", Bidir, Phase{AddedMedian: 5.5, AddedP95: 9, AddedDown: 2.75, AddedUp: 2.75}, 0, false, true, 9800, 2000},
		// a saturated core: both down to fit it (0.8/0.95 of the rates),
		// however far the miss; once only
		{"bidirectional, CPU-bound", Bidir, Phase{AddedMedian: 12, AddedP95: 14, AddedDown: 11, AddedUp: 11, CPU: &bbresult.PhaseCPU{Bound: true, BusiestShare: 0.95}}, 0, true, true, 8421, 1684},
		{"bidirectional, CPU-bound again", Bidir, Phase{AddedMedian: 12, AddedP95: 14, CPU: &bbresult.PhaseCPU{Bound: true, BusiestShare: 0.95}}, 1, true, false, 10000, 2000},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Result{Target: APlus, Download: Choice{RateKbit: 10000}, Upload: Choice{RateKbit: 2000}, ConfirmLowered: c.lowered}
			if ok := r.LowerAfterConfirm(c.k, c.p, c.confirmAgain); ok != c.ok {
				t.Fatalf("lowered %v, want %v", ok, c.ok)
			}
			if r.Download.RateKbit != c.down || r.Upload.RateKbit != c.up {
				t.Errorf("rates %d/%d, want %d/%d", r.Download.RateKbit, r.Upload.RateKbit, c.down, c.up)
			}
			want := c.lowered
			if c.ok {
				want++
			}
			if r.ConfirmLowered != want {
				t.Errorf("ConfirmLowered %d, want %d", r.ConfirmLowered, want)
			}
			for _, ch := range []*Choice{&r.Download, &r.Upload} {
				moved := ch.RateKbit != 10000 && ch.RateKbit != 2000
				if ch.Has(RuleConfirmLowered) != moved {
					t.Errorf("rules %v on a choice lowered %v", ch.Rules, moved)
				}
				if unconfirmed := moved && !c.confirmAgain; ch.Has(RuleNoRoomToConfirm) != unconfirmed || ch.Has(RuleBudgetBound) != unconfirmed {
					t.Errorf("rules %v, want unconfirmed %v", ch.Rules, unconfirmed)
				}
			}
		})
	}
}

// A missed confirm phase is measured again only when the mean of two can
// meet the bars: under twice each.
func TestMeasureAgain(t *testing.T) {
	for _, c := range []struct {
		med, p95 float64
		want     bool
	}{
		{5.5, 9, true},
		{9.9, 29.9, true},
		{10, 9, false},
		{4, 30, false},
	} {
		if got := MeasureAgain(APlus, Phase{AddedMedian: c.med, AddedP95: c.p95}); got != c.want {
			t.Errorf("+%.1f/+%.1f ms against A+: %v, want %v", c.med, c.p95, got, c.want)
		}
	}
}

// PhaseOf carries the CPU cost measured during the phase it reads (the
// confirming test's, on the router), so a CPU-bound miss is seen as one.
func TestPhaseOfCPU(t *testing.T) {
	res := &bbresult.Result{Phases: []bbresult.Phase{{Name: "download", Start: 0, End: 10}, {Name: "bidirectional", Start: 10, End: 20}},
		CPU: []bbresult.PhaseCPU{{Phase: "bidirectional", Bound: true, BusiestShare: 0.96}}}
	bi, err := PhaseOf(res, Bidir)
	if err != nil || bi.CPU == nil || !bi.CPU.Bound {
		t.Errorf("bidirectional: %+v %v, want its CPU cost", bi, err)
	}
	if d, err := PhaseOf(res, Download); err != nil || d.CPU != nil {
		t.Errorf("download: %+v %v, want no CPU cost", d, err)
	}
}
