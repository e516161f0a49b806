package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// On a slow line the bidirectional phases are long: a short one reads
// the start-up queue the modem has not drained yet (adsl-atm × nss at the
// sweep's best: +39 to +86 ms in 6 s, +28 to +32 in 30 s), and the search
// lowers the upload for it. A long phase costs two steps, and the search
// stays inside a 3 minute budget's steps. A fast line keeps short phases.
func TestSlowLineLongBidir(t *testing.T) {
	for _, tc := range []struct {
		up   float64
		long bool
	}{{906, true}, {7600, false}} {
		t.Run(fmt.Sprint(tc.up), func(t *testing.T) {
			s := newSim()
			s.up, s.startupMs = tc.up, 40
			c := searchConfig()
			c.MaxSteps = 13
			r, err := Search(context.Background(), s, c)
			if err != nil {
				t.Fatal(err)
			}
			if r.longBidir() != tc.long || (s.longs > 0) != tc.long {
				t.Fatalf("longBidir %v, %d long phases: want long ones %v", r.longBidir(), s.longs, tc.long)
			}
			if s.oneSegment != tc.long {
				t.Errorf("the upload one segment per packet: %v, want %v (the slow upload's)", s.oneSegment, tc.long)
			}
			if !tc.long {
				return
			}
			if s.cost > c.MaxSteps {
				t.Errorf("the search's steps cost %d, over the %d of a 3 minute budget", s.cost, c.MaxSteps)
			}
			best := s.best(s.up, r.Upload.Target)
			if float64(r.Upload.RateKbit) < 0.97*float64(best) || float64(r.Upload.RateKbit) > 1.01*float64(best) {
				t.Errorf("upload: chose %d kbit/s, best is %d (%s)", r.Upload.RateKbit, best, r.Upload.Why)
			}
		})
	}
}

// A second lowering of one direction is no larger than the line through
// its two misses says is left to the bar: a FIFO past the knee fills with
// the excess rate, and the miss shrinks with it (a lab adsl-atm × nss
// upload, in A+'s bars: ten bars, then 2.7 after one lowering).
func TestBidirLoweringBySecant(t *testing.T) {
	l, r := scriptedBidir(t, [4]int{7086, 6730, 906, 843}, "",
		Phase{AddedMedian: 49.9, AddedP95: 59.4, AddedDown: 0.3, AddedUp: 44.7},
		Phase{AddedMedian: 13.7, AddedP95: 17.4, AddedDown: 2.2, AddedUp: 11.2},
		Phase{AddedMedian: 3.0, AddedP95: 8.0, AddedDown: 1.0, AddedUp: 2.0})
	second, third := l.rates[1], l.rates[2]
	if up := 843; second != [2]int{6730, int(float64(up) * (1 - 3*BidirStep))} {
		t.Errorf("after a miss by ten bars: %v, want the upload three steps lower", second)
	}
	if want := int(float64(second[1]) * (1 - BidirStep)); third != [2]int{6730, want} || float64(third[1]) < 0.97*790 {
		t.Errorf("after the miss fell to 2.7 bars: %v, want the upload one step lower, %d", third, want)
	}
	if r.Upload.RateKbit != third[1] || r.BidirLowered != 2 {
		t.Errorf("chose %d, lowered %d times", r.Upload.RateKbit, r.BidirLowered)
	}
}

// Beside a slow upload a bidirectional miss lowers the upload, whose
// queue clumps the download's ACKs: both one-way delays over twice the
// bar, or split about evenly. The download alone over the bar, beside an
// upload under it, is the download's own queue. A fast pair keeps
// Queued's rule.
func TestBidirSlowLineLowersItsOwn(t *testing.T) {
	both := Phase{AddedMedian: 364.9, AddedP95: 547.5, AddedDown: 127.6, AddedUp: 212.9}
	// a lab miss of +16.6/+19.5 against A's 30, in A+'s bars (scriptedBidir's)
	even := Phase{AddedMedian: 6.3, AddedP95: 17.5, AddedDown: 2.8, AddedUp: 3.3}
	down := Phase{AddedMedian: 12, AddedP95: 20, AddedDown: 11, AddedUp: 1}
	for _, tc := range []struct {
		name string
		slow Kind
		miss Phase
		want [2]bool // download, upload lowered
	}{
		{"both queued, slow upload", Upload, both, [2]bool{false, true}},
		{"even split, slow upload", Upload, even, [2]bool{false, true}},
		{"the download's own, slow upload", Upload, down, [2]bool{true, false}},
		{"both queued, fast", "", both, [2]bool{true, true}},
		{"even split, fast", "", even, [2]bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, r := scriptedBidir(t, [4]int{7124, 6766, 959, 845}, tc.slow, tc.miss,
				Phase{AddedMedian: 3.0, AddedP95: 8.0, AddedDown: 1.0, AddedUp: 2.0})
			second := l.rates[1]
			if got := [2]bool{second[0] < 6766, second[1] < 845}; got != tc.want {
				t.Errorf("after the miss: %v, lowered (download, upload) %v, want %v", second, got, tc.want)
			}
			if r.Download.RateKbit != second[0] || r.Upload.RateKbit != second[1] {
				t.Errorf("chose %d/%d, passed at %v", r.Download.RateKbit, r.Upload.RateKbit, second)
			}
		})
	}
}

// A bidirectional lowering that does not lower the delay moved the wrong
// direction: it goes back, and the other one comes down (the one-way
// split, 3 ms off, blamed the download; the queue was the upload's).
func TestBidirWrongDirection(t *testing.T) {
	s := newSim()
	s.bidirExtra, s.bidirUp, s.offsetMs = 8, true, 3
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	var oneWay int
	for _, st := range r.Steps {
		if st.Kind == Bidir {
			oneWay = st.RateKbit
			break
		}
	}
	if r.Download.RateKbit != oneWay || !r.Download.Has(RuleUselessLowering) {
		t.Errorf("download %d (its one-way choice %d): %q", r.Download.RateKbit, oneWay, r.Download.Why)
	}
	if !wasLowered(r.Upload) || r.BidirMedian > APlus.MedianMs {
		t.Errorf("upload %d: %q; bidirectional +%.1f ms", r.Upload.RateKbit, r.Upload.Why, r.BidirMedian)
	}
}

// script is a link whose bidirectional phases are given in turn.
type script struct {
	phases []Phase
	rates  [][2]int
}

func (s *script) SetRates(_ context.Context, down, up int) error {
	s.rates = append(s.rates, [2]int{down, up})
	return nil
}

func (s *script) SlowUpload() {}

func (s *script) Load(context.Context, Kind, Length) (Phase, error) {
	if len(s.phases) == 0 {
		return Phase{}, errors.New("script ran out")
	}
	p := s.phases[0]
	s.phases = s.phases[1:]
	return p, nil
}

// scriptedBidir runs the bidirectional check on a script of phases from
// the rates lr: download line and rate, upload line and rate.
func scriptedBidir(t *testing.T, lr [4]int, slow Kind, phases ...Phase) (*script, *Result) {
	t.Helper()
	l := &script{phases: phases}
	r := &Result{Target: APlus}
	r.Download.Line.RateKbit, r.Download.RateKbit = lr[0], lr[1]
	r.Upload.Line.RateKbit, r.Upload.RateKbit = lr[2], lr[3]
	if slow != "" {
		r.choice(slow).Slow = true
	}
	s := &searcher{l: l, c: Config{Target: APlus}, r: r}
	if err := s.bidir(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, r
}

// A lowering that lowered its own direction's delay stands though the
// whole delay did not fall, when the other direction's queue showed up
// beside it; each one-way delay alone over the bar lowers both.
func TestBidirLoweringHelpedItsOwn(t *testing.T) {
	l, r := scriptedBidir(t, [4]int{19897, 19150, 19645, 19276}, "",
		Phase{AddedMedian: 48.7, AddedP95: 82.8, AddedDown: 56.0, AddedUp: 3.1},
		Phase{AddedMedian: 44.2, AddedP95: 81.3, AddedDown: 15.1, AddedUp: 25.1},
		Phase{AddedMedian: 3.0, AddedP95: 8.0, AddedDown: 2.0, AddedUp: 1.0})
	second, third := l.rates[1], l.rates[2]
	if second[0] >= 19150 || second[1] != 19276 {
		t.Errorf("after the download's miss: %v, want the download lowered alone", second)
	}
	if third[0] >= second[0] || third[1] >= 19276 || r.Download.Has(RuleUselessLowering) {
		t.Errorf("after both queued: %v (before %v), want both lowered and the download's lowering kept: %s", third, second, r.Download.Why)
	}
	if r.Download.RateKbit != third[0] || r.Upload.RateKbit != third[1] {
		t.Errorf("chose %d/%d, passed at %v", r.Download.RateKbit, r.Upload.RateKbit, third)
	}
}

// A lowering after which the lowered direction's own delay rose stands: a
// lower rate cannot queue more, so the rise is noise, and the split, still
// the download's, lowers it again rather than putting it back for the
// upload until the lowerings run out.
func TestBidirOwnDelayRoseIsNoise(t *testing.T) {
	l, r := scriptedBidir(t, [4]int{39842, 38758, 8000, 7905}, "",
		Phase{AddedMedian: 6.8, AddedP95: 11.0, AddedDown: 5.3, AddedUp: 1.4},
		Phase{AddedMedian: 9.2, AddedP95: 16.0, AddedDown: 7.3, AddedUp: 1.8},
		Phase{AddedMedian: 2.0, AddedP95: 6.0, AddedDown: 1.5, AddedUp: 0.5})
	if len(l.rates) != 3 {
		t.Fatalf("rates set %v, want three bidirectional steps", l.rates)
	}
	second, third := l.rates[1], l.rates[2]
	if third[0] >= second[0] || third[1] != 7905 || r.Download.Has(RuleUselessLowering) {
		t.Errorf("after the download's own delay rose: %v (before %v), want the download lowered again and the upload kept: %s", third, second, r.Download.Why)
	}
}

// A direction above its measured line comes back to the line on the
// first bidirectional miss, whatever the one-way split blamed.
func TestBidirAboveLineFirst(t *testing.T) {
	s := newSim()
	s.knee, s.lineRead = 0.99, 0.95 // the line reads low, the search steps above it
	s.bidirExtra, s.bidirUp, s.offsetMs = 30, true, 3
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	var bidir []Step
	for _, st := range r.Steps {
		if st.Kind == Bidir {
			bidir = append(bidir, st)
		}
	}
	if len(bidir) < 2 {
		t.Fatalf("bidirectional steps %+v", bidir)
	}
	if up := r.Upload.Line.RateKbit; bidir[0].Other <= up || bidir[1].Other != up {
		t.Errorf("upload %d beside the first miss, then %d; its line %d", bidir[0].Other, bidir[1].Other, up)
	}
}

// A direction brought back to its line for a bidirectional miss stays
// there when that did not lower the delay: the other one is lowered, and
// the first is never put back above its line.
func TestBidirBackToLineStays(t *testing.T) {
	l := newSim()
	l.down, l.up, l.knee, l.slopeMs, l.bidirShift = 10000, 8000, 0.99, 3, 0.06 // the download's queue
	r := &Result{Target: APlus}
	r.Download.Line.RateKbit, r.Download.RateKbit = 10000, 10000
	r.Upload.Line.RateKbit, r.Upload.RateKbit = 7600, 7800 // a line read low, a step above it
	s := &searcher{l: l, c: Config{Target: APlus}, r: r}
	if err := s.bidir(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, st := range r.Steps[1:] {
		if st.Other > 7600 {
			t.Errorf("bidirectional step %d: upload %d, above its line 7600", i+2, st.Other)
		}
	}
	if r.Download.RateKbit >= 10000 || r.Upload.RateKbit != 7600 || !r.Steps[len(r.Steps)-1].Pass {
		t.Errorf("ended at %d/%d: %+v", r.Download.RateKbit, r.Upload.RateKbit, r.Steps)
	}
}

// On a shaper that undercounts the other direction's ACKs (nss), the
// bidirectional phase starts that much below the one-way knees and passes
// there, where the one-way rates would miss it and cost a lowering step.
func TestBidirAckUncounted(t *testing.T) {
	for _, ack := range []float64{0, 0.004} {
		t.Run(fmt.Sprint(ack), func(t *testing.T) {
			l := newSim()
			// a cliff at the line; ACKs 1.9 % of the upload's line beside
			// 36 Mbit/s of download, more than the step under the line
			l.knee, l.ackUp = 1, ack
			c := searchConfig()
			c.AckUncounted = ack
			r, err := Search(context.Background(), l, c)
			if err != nil {
				t.Fatal(err)
			}
			wantAck := int(math.Round(ack * float64(r.Download.Line.GoodputKbit)))
			if r.Upload.AckKbit != wantAck || r.BidirLowered != 0 || r.Upload.RateKbit < int(0.985*l.up)-wantAck {
				t.Errorf("upload %d (ACKs %d, want %d), lowered %d times for the bidirectional phase: %s",
					r.Upload.RateKbit, r.Upload.AckKbit, wantAck, r.BidirLowered, r.Upload.Why)
			}
			if up := r.Upload.RateKbit + wantAck; float64(up) > l.up {
				t.Errorf("upload %d + %d kbit/s of ACKs is above its line %.0f", r.Upload.RateKbit, wantAck, l.up)
			}
		})
	}
}

// A bidirectional miss with no phase left in the budget still lowers the
// rates, once, and leaves the measuring to the confirming test.
func TestBidirMissOutOfBudget(t *testing.T) {
	l := newSim()
	l.flat, l.bidirExtra, l.bidirUp = true, 30, true // the upload's queue
	r := &Result{Target: APlus}
	for _, c := range []*Choice{&r.Download, &r.Upload} {
		c.Line.RateKbit, c.RateKbit = 10000, 9500
	}
	s := &searcher{l: l, c: Config{Target: APlus, MaxSteps: 1}, r: r}
	if err := s.bidir(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 1 || r.Download.RateKbit != 9500 || r.Upload.RateKbit >= 9500 || !r.Upload.Has(RuleUnmeasured) {
		t.Errorf("%d steps, ended at %d/%d: %q", len(r.Steps), r.Download.RateKbit, r.Upload.RateKbit, r.Upload.Why)
	}
}

// A borderline bidirectional pass the budget cannot measure again lowers
// a direction at its line one step; measured twice, or below the line, it
// stands.
func TestBidirAtLineUnsettled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxSteps  int     // 0: unbounded
		share     float64 // of the line, both directions
		extra     float64 // ms the bidirectional phase adds to the sim's 1/4
		wantLower bool
	}{
		{"at the line, no budget", 1, 1, 3.5, true},
		{"at the line, measured twice", 0, 1, 3.5, false},
		{"below the line, no budget", 1, 0.97, 3.5, false},
		{"at the line, clear pass", 1, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSim()
			l.flat, l.bidirExtra = true, tc.extra
			r := &Result{Target: APlus}
			for _, c := range []*Choice{&r.Download, &r.Upload} {
				c.Line.RateKbit = 10000
				c.RateKbit = int(tc.share * 10000)
			}
			s := &searcher{l: l, c: Config{Target: APlus, MaxSteps: tc.maxSteps}, r: r}
			if err := s.bidir(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := int(tc.share * 10000)
			if tc.wantLower {
				want = int(float64(want) * (1 - BidirStep))
			}
			last := r.Steps[len(r.Steps)-1]
			if r.Download.RateKbit != want || r.Upload.RateKbit != want || !last.Pass || last.Unsettled != tc.wantLower {
				t.Errorf("rates %d/%d, want %d; last step %+v", r.Download.RateKbit, r.Upload.RateKbit, want, last)
			}
		})
	}
}

func TestBidirLowers(t *testing.T) {
	searched := func(setup func(*sim)) (*sim, *Result) {
		t.Helper()
		s := newSim()
		setup(s)
		r, err := Search(context.Background(), s, searchConfig())
		if err != nil {
			t.Fatal(err)
		}
		return s, r
	}
	// a gentle curve: a few % lower buys the bidirectional phase back
	_, r := searched(func(s *sim) { s.knee, s.slopeMs, s.bidirExtra = 0.9, 1, 2 })
	if r.BidirLowered == 0 || r.BidirMedian > APlus.MedianMs {
		t.Errorf("lowered %d times, bidirectional +%.1f ms", r.BidirLowered, r.BidirMedian)
	}
	// the upload's queue, three quarters of the delay and more: only the
	// upload is lowered
	_, r = searched(func(s *sim) { s.bidirExtra, s.bidirUp = 30, true })
	if r.BidirLowered == 0 || wasLowered(r.Download) || !wasLowered(r.Upload) {
		t.Errorf("upload-only bidirectional queue: download %q, upload %q", r.Download.Why, r.Upload.Why)
	}
	// the download's queue, with the upload's share of the delay over a
	// quarter: only the download is lowered
	_, r = searched(func(s *sim) { s.knee, s.slopeMs, s.bidirShift = 0.95, 3, 0.02 })
	if r.BidirLowered == 0 || !wasLowered(r.Download) || wasLowered(r.Upload) {
		t.Errorf("download's bidirectional queue: download %q, upload %q", r.Download.Why, r.Upload.Why)
	}
	// bidirBest is the best A+ download of s's link with its knee where
	// both directions loaded put it
	bidirBest := func(s *sim) int {
		shifted := newSim()
		shifted.knee -= s.bidirShift
		return shifted.best(s.down, APlus)
	}
	// the download's knee 6 % lower with both loaded (as on the lab's
	// vdsl × cake): a miss by several bars steps down several times 2 % at
	// once, and lands within the acceptance of the bidirectional best
	s, r := searched(func(s *sim) { s.knee, s.slopeMs, s.bidirShift = 0.95, 3, 0.06 })
	best := bidirBest(s)
	if r.BidirLowered > 2 || r.BidirMedian > APlus.MedianMs ||
		float64(r.Download.RateKbit) < 0.97*float64(best) || float64(r.Download.RateKbit) > 1.01*float64(best) {
		t.Errorf("download's knee 6%% lower when both load: lowered %d times to %d (bidirectional best %d), +%.1f ms: %s",
			r.BidirLowered, r.Download.RateKbit, best, r.BidirMedian, r.Download.Why)
	}
	// a line read low: the one-way search settles above the measured
	// line, where the bidirectional phase meets a cliff and misses by
	// far; the first lowering goes back to the line, not three steps
	// under it
	s, r = searched(func(s *sim) { s.lineRead, s.knee, s.bidirShift = 0.985, 0.995, 0.015 })
	best = bidirBest(s)
	if !r.Download.Has(RuleBackToLine) || float64(r.Download.RateKbit) < 0.99*float64(best) || r.BidirMedian > APlus.MedianMs {
		t.Errorf("a bidirectional miss above the line: %d kbit/s (bidirectional best %d, line %d), +%.1f ms: %s",
			r.Download.RateKbit, best, r.Download.Line.RateKbit, r.BidirMedian, r.Download.Why)
	}
	s = newSim()
	s.bidirExtra = 50
	if _, err := Search(context.Background(), s, searchConfig()); !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "bidirectional") {
		t.Errorf("hopeless bidirectional: %v", err)
	}
}

// Queued reads whose queue a bidirectional delay was: the upload's when
// its one-way delay carries three quarters, both when each is over twice
// the bar or none was measured, else the download's.
func TestQueued(t *testing.T) {
	for _, c := range []struct {
		down, up         float64
		wantDown, wantUp bool
	}{
		{4.0, 1.6, true, false}, // a CI run's download-heavy split
		{0.5, 8.2, false, true},
		{1.5, 4.5, false, true},  // 75 % is the line: exactly there counts as the upload's
		{1.5, 4.0, true, false},  // 73 %: the download's
		{15.1, 25.1, true, true}, // both queues formed (lab fiber × cake)
		{4.5, 10.5, false, true}, // 70 %, but the upload alone is over the bar by more than the split's error
		{4.5, 9.5, true, false},  // 68 %, within that error of the bar
		{5.5, 10.5, true, false}, // 66 %, the download over the bar too
		{10.5, 4.5, true, false},
		{0, 0, true, true},
	} {
		if d, u := Queued(c.down, c.up, 5); d != c.wantDown || u != c.wantUp {
			t.Errorf("Queued(%v, %v) = %v, %v; want %v, %v", c.down, c.up, d, u, c.wantDown, c.wantUp)
		}
	}
	// against A's 30 ms (a lab adsl-atm × nss miss, 73 % upstream)
	if d, u := Queued(18.8, 51.7, 30); d || !u {
		t.Errorf("Queued(18.8, 51.7) against 30 ms = %v, %v; want the upload's", d, u)
	}
}

// wasLowered: the rate came down for the bidirectional phase, the confirming
// test, or a pass on the edge at the line.
func wasLowered(c Choice) bool {
	return c.Has(RuleLowered) || c.Has(RuleEdgeAtLine) || c.Has(RuleConfirmLowered)
}

// A bidirectional miss with the router's busiest core saturated lowers
// both directions at once, by the share that brings that core to cpuFit
// (97 % busy: both to 0.8/0.97 of their rates), and the result keeps the
// phase as the router's ceiling; a miss on an idle CPU lowers as before.
func TestBidirCPUBound(t *testing.T) {
	bound := &bbresult.PhaseCPU{Bound: true, Busiest: 1, BusiestShare: 0.97, BusiestSoftirq: 0.8}
	l, r := scriptedBidir(t, [4]int{150000, 140000, 150000, 140000}, "",
		Phase{AddedMedian: 20, AddedP95: 40, AddedDown: 10, AddedUp: 10, DownKbit: 90000, UpKbit: 80000, CPU: bound},
		Phase{AddedMedian: 2, AddedP95: 4, AddedDown: 1, AddedUp: 1})
	rate, k := 140000.0, 0.8/0.97
	want := int(rate * k)
	if len(l.rates) != 2 || l.rates[1] != [2]int{want, want} {
		t.Fatalf("rates measured %v, want both lowered to %d after the CPU-bound miss", l.rates, want)
	}
	if r.BidirCPU == nil || r.BidirCPU.BusiestShare != 0.97 || !r.Download.Has(RuleCPUBound) || !r.Upload.Has(RuleCPUBound) ||
		!strings.Contains(r.Download.Why, "cpu1 was busy 97% at 170000 kbit/s together") {
		t.Errorf("result %+v; download: %s", r.BidirCPU, r.Download.Why)
	}
	// a ceiling far under the line: more CPU-bound misses than a queue's
	// lowerings may take, each followed down
	miss := Phase{AddedMedian: 20, AddedP95: 40, AddedDown: 10, AddedUp: 10, DownKbit: 90000, UpKbit: 80000, CPU: bound}
	l, r = scriptedBidir(t, [4]int{150000, 140000, 150000, 140000}, "", miss, miss, miss, miss, miss, miss,
		Phase{AddedMedian: 2, AddedP95: 4, AddedDown: 1, AddedUp: 1})
	if len(l.rates) != 7 || r.BidirLowered != 6 {
		t.Errorf("after six CPU-bound misses: %d phases, %d lowerings", len(l.rates), r.BidirLowered)
	}
	idle := *bound
	idle.Bound = false
	l, r = scriptedBidir(t, [4]int{150000, 140000, 150000, 140000}, "",
		Phase{AddedMedian: 20, AddedP95: 40, AddedDown: 10, AddedUp: 10, DownKbit: 90000, UpKbit: 80000, CPU: &idle},
		Phase{AddedMedian: 2, AddedP95: 4, AddedDown: 1, AddedUp: 1})
	if r.BidirCPU != nil || r.Download.Has(RuleCPUBound) || l.rates[1][0] == want {
		t.Errorf("an unbound CPU's miss: rates %v, cpu %+v", l.rates, r.BidirCPU)
	}
}
