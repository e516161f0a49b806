package tune

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sim is a simulated link: a line of Line kbit/s (shaper-rate terms) per
// direction whose added latency under load grows once the shaper rate
// passes Knee of the line (the queue moves into the modem), with optional
// noise, a boost at the start of the line measurement, and a server that
// vanishes after a number of phases.
type sim struct {
	down, up  float64 // line rates
	knee      float64 // share of the line where the latency starts to grow
	slopeMs   float64 // added ms per 1 % of the line above the knee
	flat      bool    // never bloated
	noiseMs   float64
	boost     float64 // first boostSecs s of a line phase run at this multiple
	boostSecs int
	// boostSteps: the bucket refills between phases, so a download step
	// up to the boost rate reads like the line itself (a short step
	// above the sustained line passes on the bucket)
	boostSteps bool
	// lateQueue: a short step up to this share of the line above it
	// reads like the line itself (its queue has not grown yet, or TCP has
	// not filled its shaper), carrying no more than the line
	lateQueue  float64
	bidirExtra float64 // ms the bidirectional phase adds
	bidirUp    bool    // and only in the upload's one-way delay
	// offsetMs is the one-way split's error: the clock offset estimated
	// from idle probes, moving that much of the upload's delay to the
	// download's side
	offsetMs   float64
	bidirShift float64 // the download's knee is this much lower in the bidirectional phase
	// ackUp is the upload's rate per kbit/s of download goodput that its
	// shaper does not count (the download's ACKs): in the bidirectional
	// phase the upload's line carries that much more than its rate
	ackUp     float64
	failAfter int     // phases before the server vanishes; 0 never
	series    []int   // a line phase's goodput per second, as recorded; nil: flat
	lineRead  float64 // the line phase reads this share of the line; 0: all of it
	v6        bool    // phases run over IPv6
	// upFloor is the least added median the upload's queue shows at any
	// rate (p95 twice it): a slow link's own packet time (1 Mbit/s ATM:
	// 13.6 ms per full-size packet), which no shaper rate removes.
	upFloor float64
	// startupMs is what a short bidirectional phase reads over a long
	// one at the upload's knee, in proportion to the upload's share of its
	// line above 85 %: a slow line's start-up queue, which drains at the
	// little the line carries beyond the load, for longer than a step
	startupMs float64
	perGood   float64
	// cost is the search steps' test time so far, in steps (a long phase
	// costs longSteps); longs counts the long phases
	cost, longs int

	rng            *rand.Rand
	rateD, rateU   float64
	phases, setsOK int
	oneSegment     bool // SlowUpload was called
}

func (s *sim) SlowUpload() { s.oneSegment = true }

func newSim() *sim {
	return &sim{down: 38000, up: 7600, knee: 0.96, slopeMs: 8, perGood: 1.05, boostSecs: 5, rng: rand.New(rand.NewPCG(1, 2))}
}

func (s *sim) SetRates(_ context.Context, down, up int) error {
	if down > 0 {
		s.rateD = float64(down)
	}
	if up > 0 {
		s.rateU = float64(up)
	}
	s.setsOK++
	return nil
}

// added is the model's latency at share x of the line, without noise.
func (s *sim) added(x float64) (med, p95 float64) {
	med, p95 = 1, 4
	if !s.flat && x > s.knee {
		over := (x - s.knee) * 100 * s.slopeMs
		med, p95 = med+over, p95+2*over
	}
	return med, p95
}

// upAdded is added for the upload, with its floor.
func (s *sim) upAdded(x float64) (med, p95 float64) {
	med, p95 = s.added(x)
	return math.Max(med, s.upFloor), math.Max(p95, 2*s.upFloor)
}

func (s *sim) Load(_ context.Context, k Kind, n Length) (Phase, error) {
	s.phases++
	line := n == LinePhase
	switch n {
	case StepPhase:
		s.cost++
	case LongPhase:
		s.cost, s.longs = s.cost+longSteps, s.longs+1
	}
	if s.failAfter > 0 && s.phases > s.failAfter {
		return Phase{}, errors.New("server went away")
	}
	var p Phase
	xd, xu := s.rateD/s.down, s.rateU/s.up
	good := func(rate, line float64) int { return int(math.Min(rate, line) / s.perGood) }
	switch k {
	case Download:
		x := xd
		if (s.boostSteps && x > 1 && x <= s.boost) || (x > 1 && x <= s.lateQueue) {
			x = 1
		}
		p.AddedMedian, p.AddedP95 = s.added(x)
		p.DownKbit = good(s.rateD, s.down)
	case Upload:
		p.AddedMedian, p.AddedP95 = s.upAdded(xu)
		p.UpKbit = good(s.rateU, s.up)
	case Bidir:
		md, pd := s.added(xd + s.bidirShift)
		mu, pu := s.upAdded(xu + s.ackUp*float64(good(s.rateD, s.down))/s.up)
		p.AddedMedian, p.AddedP95 = math.Max(md, mu)+s.bidirExtra, math.Max(pd, pu)+s.bidirExtra
		if s.bidirShift > 0 {
			p.AddedDown, p.AddedUp = md, mu
		}
		if s.bidirUp { // the extra queue is the upload's, and shrinks as its rate comes down
			extra := s.bidirExtra * math.Max(0, (xu-0.9)/0.06)
			p.AddedMedian, p.AddedP95 = math.Max(md, mu+extra), math.Max(pd, pu+extra)
			p.AddedDown, p.AddedUp = md+s.offsetMs, mu+extra-s.offsetMs
		}
		p.DownKbit, p.UpKbit = good(s.rateD, s.down), good(s.rateU, s.up)
		if n == StepPhase && s.startupMs > 0 {
			extra := s.startupMs * math.Max(0, (xu-0.85)/0.1)
			p.AddedMedian, p.AddedP95, p.AddedUp = p.AddedMedian+extra, p.AddedP95+extra, p.AddedUp+extra
		}
	}
	if s.noiseMs > 0 {
		n := (s.rng.Float64()*2 - 1) * s.noiseMs
		p.AddedMedian, p.AddedP95 = math.Max(0, p.AddedMedian+n), math.Max(0, p.AddedP95+2*n)
	}
	p.IPv6 = s.v6
	if line && s.lineRead > 0 {
		p.DownKbit, p.UpKbit = int(float64(p.DownKbit)*s.lineRead), int(float64(p.UpKbit)*s.lineRead)
	}
	if line && s.series != nil {
		p.PerSecond = s.series
	} else if line {
		g := p.goodput(k)
		for sec := range 12 {
			v := g
			if sec < s.boostSecs && s.boost > 0 {
				v = int(float64(g) * s.boost)
			}
			p.PerSecond = append(p.PerSecond, v)
		}
	}
	return p, nil
}

// best is the highest rate (to 0.1 % of the line) the noiseless model
// says meets t.
func (s *sim) best(line float64, t Target) int {
	for x := 1.0; x > 0.3; x -= 0.001 {
		m, p := s.added(x)
		if meets(t, m, p) {
			return int(x * line)
		}
	}
	return 0
}

func searchConfig() Config {
	return Config{Target: APlus, OpenDown: 400000, OpenUp: 80000, RatePerGoodput: 1.05}
}

func TestSearch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*sim)
	}{
		{"monotone", func(*sim) {}},
		{"knee low", func(s *sim) { s.knee = 0.85 }},
		{"noisy", func(s *sim) { s.noiseMs = 1 }},
		{"steep", func(s *sim) { s.slopeMs = 40 }},
		{"boost", func(s *sim) { s.boost = 1.2 }},
		// a boost past the phase's half (TCP drains the bucket slower than
		// its size suggests): the last third is still the line
		{"long boost", func(s *sim) { s.boost, s.boostSecs = 1.15, 7 }},
		// the line reads low and the knee sits at the real line: every
		// rate up to the measured line passes (vdsl's upload, 7aa51ff)
		{"line read low", func(s *sim) { s.lineRead, s.knee = 0.95, 0.995 }},
		{"line read a little low", func(s *sim) { s.lineRead, s.knee = 0.985, 0.995 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim()
			tc.setup(s)
			r, err := Search(context.Background(), s, searchConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []struct {
				k    Kind
				c    Choice
				line float64
			}{{Download, r.Download, s.down}, {Upload, r.Upload, s.up}} {
				best := s.best(d.line, APlus)
				// the lab's acceptance: >= 97 % of the best, never above it by more than 1 %
				if float64(d.c.RateKbit) < 0.97*float64(best) || float64(d.c.RateKbit) > 1.01*float64(best) {
					t.Errorf("%s: chose %d kbit/s, best is %d (%s)", d.k, d.c.RateKbit, best, d.c.Why)
				}
				if d.c.Rule95 != int(math.Round(0.95*float64(d.c.Line.RateKbit))) {
					t.Errorf("%s: 95%% rule %d of line %d", d.k, d.c.Rule95, d.c.Line.RateKbit)
				}
				if s.boost > 0 && d.c.Line.BoostKbit == 0 {
					t.Errorf("%s: the boost went unnoticed: %+v", d.k, d.c.Line)
				}
				if s.boost == 0 && d.c.Line.BoostKbit != 0 {
					t.Errorf("%s: a boost where there is none: %+v", d.k, d.c.Line)
				}
				// the line measured is the sustained one, boost or not
				want := int(d.line / s.perGood)
				if s.lineRead > 0 {
					want = int(float64(want) * s.lineRead)
				}
				if d.c.Line.GoodputKbit != want {
					t.Errorf("%s: line goodput %d, want %d", d.k, d.c.Line.GoodputKbit, want)
				}
			}
			// few steps: two line phases, a bisection each, a bidirectional check
			if s.phases > 24 {
				t.Errorf("%d phases", s.phases)
			}
			if s.rateD != float64(r.Download.RateKbit) || s.rateU != float64(r.Upload.RateKbit) {
				t.Errorf("left the link at %v/%v, chose %d/%d", s.rateD, s.rateU, r.Download.RateKbit, r.Upload.RateKbit)
			}
		})
	}
}

// Over IPv6 a full-size packet carries 20 bytes less payload, so the same
// goodput is a higher shaper rate; the probes that ran beside the streams
// are part of what the line carried.
func TestLineRate(t *testing.T) {
	c := searchConfig()
	c.ProbeKbit = 80
	for _, v6 := range []bool{false, true} {
		s := newSim()
		s.v6 = v6
		s.SetRates(context.Background(), 400000, 80000)
		r := &search{l: s, c: c, r: &Report{}}
		l, err := r.line(context.Background(), Download)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(l.GoodputKbit) * c.RatePerGoodput
		if v6 {
			want *= 1448.0 / 1428
		}
		want += c.ProbeKbit
		if math.Abs(float64(l.RateKbit)-want) > 1 {
			t.Errorf("IPv6 %v: line rate %d for %d kbit/s goodput, want %.0f", v6, l.RateKbit, l.GoodputKbit, want)
		}
	}
}

// The line is what the link carries, read from per-second goodput a
// stalling guest (or host) skews: a stalled second's bytes arrive in the
// next one's count, and the last second is the streams' teardown.
func TestLineSeries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series []int
		want   int // kbit/s goodput, ±3 %
	}{
		{"steady", []int{7000, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600, 7600}, 7600},
		// lab, cable upload (863b994): the window's first second was the catch-up of a stall
		{"stall at the window's start", []int{6423, 7733, 7471, 7602, 7471, 7733, 4456, 10485, 6029, 9044, 7340, 7733}, 7500},
		// lab, cable-boost upload (c61be6b): stalls every other second, the teardown last
		{"stalls and teardown", []int{6000, 8000, 7700, 7600, 5243, 9962, 5898, 9177, 7600, 7500, 7600, 4194}, 7500},
		// lab, cable × nss upload with the kernel's counts (0b3bcdf): the stall before the window, its catch-up inside
		{"stall just before the window", []int{6815, 7340, 7604, 7340, 7864, 7471, 5243, 9568, 6294, 9044, 7602, 7209}, 7550},
		// lab, the next run: the window's median is the stall's and its catch-up's
		{"stall before a window of stalls", []int{7211, 7504, 7550, 7532, 7522, 7542, 6224, 8953, 7550, 5387, 9623, 7563}, 7540},
		// lab, cable download (863b994)
		{"download with a stall", []int{35511, 38011, 37865, 38011, 37879, 38143, 37879, 38273, 37880, 38014, 37747, 38158, 38129, 33946, 41943,
			38142, 37881, 37751, 38141, 37878, 37883, 38009, 37879, 37880, 38012, 38011, 23462, 52430, 38010, 38141}, 37950},
		// lab, adsl-atm upload at 1 Mbit/s behind an 800 ms FIFO (10ec62e):
		// the seconds alternate with the ACKs' clumps; no boost, and the
		// link carries 745 kbit/s of TCP goodput beside the probes
		{"alternating seconds", []int{455, 1045, 776, 521, 937, 746, 399, 835, 1066, 695, 568, 972}, 745},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim()
			s.series = tc.series
			r := &search{l: s, c: searchConfig(), r: &Report{}}
			l, err := r.line(context.Background(), Upload)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(l.GoodputKbit-tc.want)) > 0.03*float64(tc.want) {
				t.Errorf("line %d kbit/s, want %d ± 3 %%", l.GoodputKbit, tc.want)
			}
			if l.BoostKbit != 0 {
				t.Errorf("a boost of %d kbit/s in a line without one", l.BoostKbit)
			}
		})
	}
}

// Behind a boost the line is the last third of the phase, and a stall in
// its last second, whose catch-up falls in the second left out, is left
// out too (lab, cable-boost × cake, 54896ce: the window read 37043 kbit/s
// of a steady 38020, and behind a boost no step looks above the line).
func TestLineBoostStallAtEnd(t *testing.T) {
	s := newSim()
	s.series = []int{42585, 45642, 45638, 45655, 45635, 45558, 45643, 45601, 45603, 45580, 38989, 38022, 38021, 38016, 22525,
		53471, 38006, 38305, 37757, 38021, 38018, 38023, 23044, 52889, 38005, 38009, 38020, 38043, 29336, 46541}
	r := &search{l: s, c: searchConfig(), r: &Report{}}
	l, err := r.line(context.Background(), Download)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(l.GoodputKbit-38020)) > 0.005*38020 {
		t.Errorf("line %d kbit/s, want 38020 ± 0.5 %%", l.GoodputKbit)
	}
	if l.BoostKbit < 45000 {
		t.Errorf("boost %d kbit/s, want the plateau's 45600", l.BoostKbit)
	}
}

func TestNotBloated(t *testing.T) {
	s := newSim()
	s.flat = true
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.RateKbit != r.Download.Line.RateKbit || !r.Download.Has(RuleNotBloated) {
		t.Errorf("flat link: %d of line %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, r.Download.Why)
	}
	// it looked above the measured line before calling it unbloated
	above := 0
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.05 && st.Pass {
			above++
		}
	}
	if above != 1 || s.rateD != float64(r.Download.Line.RateKbit) {
		t.Errorf("flat link: %d passing steps above the line, link left at %v: %+v", above, s.rateD, r.Steps)
	}
}

// A line rate that passes with its delay near a bar is the knee: no
// step above it is tried, and the rate is one step under it.
func TestLineNearKnee(t *testing.T) {
	s := newSim()
	s.knee, s.slopeMs = 0.9995, 40 // at 100 %: +3 ms median, +8 ms p95
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range r.Steps {
		if st.Kind != Bidir && st.Share > 1.001 {
			t.Errorf("a step above the line: %+v", st)
		}
	}
	// and a knee at the line is taken one step (1 %) under it
	if want := r.Download.Line.RateKbit - int(math.Round(0.01*float64(r.Download.Line.RateKbit))); r.Download.RateKbit != want ||
		!r.Download.Has(RuleKneeAtLine) || !r.Download.Has(RuleUnderLine) {
		t.Errorf("download %d of line %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, r.Download.Why)
	}
}

// A boosted line's knee is its sustained rate, and a short step above it
// passes on the bucket, which refills between steps: tune does not look
// above such a line and takes the knee one step under it.
func TestBoostedLineNoLookAbove(t *testing.T) {
	s := newSim()
	s.boost, s.boostSteps, s.knee, s.slopeMs = 1.2, true, 1.0, 40
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.Line.BoostKbit == 0 {
		t.Fatalf("the boost went unnoticed: %+v", r.Download.Line)
	}
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.001 {
			t.Errorf("a download step above the boosted line: %+v", st)
		}
	}
	if want := r.Download.Line.RateKbit - int(math.Round(0.01*float64(r.Download.Line.RateKbit))); r.Download.RateKbit != want ||
		!r.Download.Has(RuleBoost) {
		t.Errorf("download %d of line %d, want %d: %s", r.Download.RateKbit, r.Download.Line.RateKbit, want, r.Download.Why)
	}
}

// A step above a line measured right passes when its queue has not grown
// in a short phase, carrying no more than the line: that is not a knee
// above the line, and tune takes the line one step under.
func TestAboveLineUncarried(t *testing.T) {
	s := newSim()
	s.knee, s.slopeMs, s.lateQueue = 1.0, 40, 1.05
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := r.Download
	if want := d.Line.RateKbit - int(math.Round(0.01*float64(d.Line.RateKbit))); d.RateKbit != want ||
		!d.Has(RuleUncarried) {
		t.Errorf("download %d of line %d, want %d: %s", d.RateKbit, d.Line.RateKbit, want, d.Why)
	}
	// no bisection above the line: its steps cannot tell either
	above := 0
	for _, st := range r.Steps {
		if st.Kind == Download && st.Share > 1.001 {
			above++
		}
	}
	if above != 2 {
		t.Errorf("%d download steps above the line, want the two looks (103 %%, 110 %%): %+v", above, r.Steps)
	}
}

// A pass above a line read low that carried more than the line is kept
// when the budget ends the look above it, one step under (lab, adsl-atm ×
// cake, 5ae40c5: the upload's line read 963 kbit/s, 992 met A carrying
// more, and taking the line left it at 96.3 % of the sweep's best).
func TestAboveLineCarriedOutOfBudget(t *testing.T) {
	s := newSim()
	s.lineRead, s.knee, s.slopeMs = 0.96, 0.995, 40
	r := &Report{Target: APlus}
	c := searchConfig()
	c.MaxSteps, c.Resolution = 3, 0.01 // the budget ends after the look at 103 %
	sr := &search{l: s, c: c, r: r}
	s.SetRates(context.Background(), c.OpenDown, c.OpenUp)
	line, err := sr.line(context.Background(), Download)
	if err != nil {
		t.Fatal(err)
	}
	r.Download.Line = line
	if err := sr.direction(context.Background(), Download); err != nil {
		t.Fatal(err)
	}
	at := func(share float64) int { return int(math.Round(share * float64(line.RateKbit))) }
	d := r.Download
	if want := at(1.03) - at(0.01); d.RateKbit != want || !d.Has(RuleBudgetBound) || s.rateD != float64(want) {
		t.Errorf("download %d of line %d, link at %.0f, want %d: %s", d.RateKbit, line.RateKbit, s.rateD, want, d.Why)
	}
	if best := s.best(s.down, APlus); float64(d.RateKbit) > 1.01*float64(best) || float64(d.RateKbit) < 0.97*float64(best) {
		t.Errorf("download %d, the best is %d", d.RateKbit, best)
	}
}

func TestNoRate(t *testing.T) {
	s := newSim()
	s.knee = 0.3
	_, err := Search(context.Background(), s, searchConfig())
	if !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "50%") {
		t.Errorf("err %v", err)
	}
}

// TestSettlesForWeaker: an upload that misses A+ at every rate (ADSL's
// 1 Mbit/s ATM upstream) is tuned for A, the best grade the link allows,
// at the highest rate that keeps it; the download keeps A+, and the
// bidirectional phase, which holds the upload's queue, is judged on A.
func TestSettlesForWeaker(t *testing.T) {
	s := newSim()
	s.upFloor = 10
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.Download.Target != APlus || r.Download.OutOfReach != "" {
		t.Errorf("download tuned for %q (%q), want A+", r.Download.Target.Name, r.Download.OutOfReach)
	}
	if r.Upload.Target != A || !strings.Contains(r.Upload.OutOfReach, "A+") || !r.Upload.Has(RuleOutOfReach) {
		t.Errorf("upload tuned for %q: %q, %q", r.Upload.Target.Name, r.Upload.OutOfReach, r.Upload.Why)
	}
	for _, d := range []struct {
		k    Kind
		got  int
		line float64
		t    Target
	}{{Download, r.Download.RateKbit, s.down, APlus}, {Upload, r.Upload.RateKbit, s.up, A}} {
		if want := s.best(d.line, d.t); math.Abs(float64(d.got-want)) > 0.015*d.line {
			t.Errorf("%s: %d kbit/s, want about %d (the highest meeting %s)", d.k, d.got, want, d.t.Name)
		}
	}
	for _, st := range r.Steps {
		if st.Kind == Bidir && st.Target != "A" {
			t.Errorf("bidirectional step judged on %q, want A", st.Target)
		}
	}
	if r.target(Bidir) != A || r.target(Download) != APlus || r.target(Upload) != A {
		t.Errorf("targets %v %v %v", r.target(Download), r.target(Upload), r.target(Bidir))
	}
	// the delay did not come down from 95 % to 85 %: no step at the floor
	for _, st := range r.Steps {
		if st.Kind == Upload && st.Target == "A+" && st.Share < Bracket-0.01 {
			t.Errorf("upload tried %.0f%% for A+ after a flat delay at 95 and 85 %%", 100*st.Share)
		}
	}
	if !strings.Contains(r.Upload.OutOfReach, "did not lower the delay") {
		t.Errorf("out of reach: %q", r.Upload.OutOfReach)
	}
	// A is the last grade it settles for: a link that misses A too has
	// no answer.
	s = newSim()
	s.upFloor = 40
	if _, err := Search(context.Background(), s, searchConfig()); !errors.Is(err, ErrNoRate) || !strings.Contains(err.Error(), "(A)") {
		t.Errorf("upload missing A too: %v", err)
	}
}

// A line whose own packet time puts A+ out of reach (half a full-size
// packet's time over its 5 ms median) is searched against A at once, with
// no steps spent showing it; a line a little faster is searched against
// A+ first (adsl-atm × nss, 88c1a70: the upload at 906 kbit/s of nsstbl's
// count spent 861 and 770 kbit/s on A+, +9.6 and +10.9 ms).
func TestPacketTimeSettlesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		up        float64
		wantFirst string // the target of the upload's first step
	}{{906, "A"}, {2000, "A+"}} {
		t.Run(fmt.Sprint(tc.up), func(t *testing.T) {
			s := newSim()
			s.up, s.upFloor = tc.up, 8
			r, err := Search(context.Background(), s, searchConfig())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(r.Steps, func(st Step) bool { return st.Kind == Upload })
			if i < 0 || r.Steps[i].Target != tc.wantFirst {
				t.Fatalf("upload's first step %+v, want it judged on %s", r.Steps[max(i, 0)], tc.wantFirst)
			}
			if r.Upload.Target != A || !r.Upload.Has(RuleOutOfReach) {
				t.Errorf("upload tuned for %q: %q", r.Upload.Target.Name, r.Upload.Why)
			}
			if tc.wantFirst == "A" && !strings.Contains(r.Upload.OutOfReach, "packet takes 13.4 ms") {
				t.Errorf("out of reach: %q", r.Upload.OutOfReach)
			}
			if r.Download.Target != APlus {
				t.Errorf("download tuned for %q", r.Download.Target.Name)
			}
		})
	}
}

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
// the excess rate, and the miss shrinks with it (adsl-atm × nss, 88c1a70,
// in A+'s bars: the upload from 843 to 792 kbit/s took the miss from ten
// bars to 2.7, and three more steps, to 744, took it 6 % under the
// sweep's bidirectional best, 790).
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
// queue clumps the download's ACKs: both one-way delays over twice the bar
// (6f18de3: both went 6 % lower, and the download ended at 91 % of the
// sweep's best), or split about evenly (ecf9f19: the download went 2 %
// lower twice, to 95 %). The download alone over the bar, beside an
// upload under it, is the download's own queue. A fast pair keeps
// Queued's rule.
func TestBidirSlowLineLowersItsOwn(t *testing.T) {
	both := Phase{AddedMedian: 364.9, AddedP95: 547.5, AddedDown: 127.6, AddedUp: 212.9}
	// ecf9f19's +16.6/+19.5 against A's 30, in A+'s bars (scriptedBidir's)
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
func scriptedBidir(t *testing.T, lr [4]int, slow Kind, phases ...Phase) (*script, *Report) {
	t.Helper()
	l := &script{phases: phases}
	r := &Report{Target: APlus}
	r.Download.Line.RateKbit, r.Download.RateKbit = lr[0], lr[1]
	r.Upload.Line.RateKbit, r.Upload.RateKbit = lr[2], lr[3]
	if slow != "" {
		r.choice(slow).Slow = true
	}
	s := &search{l: l, c: Config{Target: APlus}, r: r}
	if err := s.bidir(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, r
}

// A lowering that lowered its own direction's delay stands though the
// whole delay did not fall, when the other direction's queue showed up
// beside it; each one-way delay alone over the bar lowers both (fiber ×
// cake, 2026-11-25: the download from +56.0 to +15.1 ms as the upload went
// from +3.1 to +25.1, and the download was put back to its +56).
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
// the download's, lowers it again (make test at 7ead45f, cable × cake over
// IPv6: +5.9, then +9.2 ms with 7.3 of it downstream, and the download was
// put back for the upload until four lowerings ran out).
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
	r := &Report{Target: APlus}
	r.Download.Line.RateKbit, r.Download.RateKbit = 10000, 10000
	r.Upload.Line.RateKbit, r.Upload.RateKbit = 7600, 7800 // a line read low, a step above it
	s := &search{l: l, c: Config{Target: APlus}, r: r}
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
	r := &Report{Target: APlus}
	for _, c := range []*Choice{&r.Download, &r.Upload} {
		c.Line.RateKbit, c.RateKbit = 10000, 9500
	}
	s := &search{l: l, c: Config{Target: APlus, MaxSteps: 1}, r: r}
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
			r := &Report{Target: APlus}
			for _, c := range []*Choice{&r.Download, &r.Upload} {
				c.Line.RateKbit = 10000
				c.RateKbit = int(tc.share * 10000)
			}
			s := &search{l: l, c: Config{Target: APlus, MaxSteps: tc.maxSteps}, r: r}
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
	s := newSim()
	s.knee = 0.9
	s.slopeMs = 1 // a gentle curve: a few % lower buys the bidirectional phase back
	s.bidirExtra = 2
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.BidirLowered == 0 || r.BidirMedian > APlus.MedianMs {
		t.Errorf("lowered %d times, bidirectional +%.1f ms", r.BidirLowered, r.BidirMedian)
	}
	// the upload's queue, three quarters of the delay and more: only the
	// upload is lowered
	s = newSim()
	s.bidirExtra, s.bidirUp = 30, true
	r, err = Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.BidirLowered == 0 || wasLowered(r.Download) || !wasLowered(r.Upload) {
		t.Errorf("upload-only bidirectional queue: download %q, upload %q", r.Download.Why, r.Upload.Why)
	}
	// the download's queue, with the upload's share of the delay over a
	// quarter: only the download is lowered
	s = newSim()
	s.knee, s.slopeMs, s.bidirShift = 0.95, 3, 0.02
	r, err = Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r.BidirLowered == 0 || !wasLowered(r.Download) || wasLowered(r.Upload) {
		t.Errorf("download's bidirectional queue: download %q, upload %q", r.Download.Why, r.Upload.Why)
	}
	// the download's knee 6 % lower with both loaded (vdsl × cake,
	// 35dc46c): a miss by several bars steps down several times 2 % at
	// once, and lands within the acceptance of the bidirectional best
	s = newSim()
	s.knee, s.slopeMs, s.bidirShift = 0.95, 3, 0.06
	r, err = Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	shifted := newSim()
	shifted.knee -= s.bidirShift
	best := shifted.best(s.down, APlus)
	if r.BidirLowered > 2 || r.BidirMedian > APlus.MedianMs ||
		float64(r.Download.RateKbit) < 0.97*float64(best) || float64(r.Download.RateKbit) > 1.01*float64(best) {
		t.Errorf("download's knee 6%% lower when both load: lowered %d times to %d (bidirectional best %d), +%.1f ms: %s",
			r.BidirLowered, r.Download.RateKbit, best, r.BidirMedian, r.Download.Why)
	}
	// a line read low: the one-way search settles above the measured
	// line, where the bidirectional phase meets a cliff and misses by
	// far; the first lowering goes back to the line, not three steps
	// under it (cable × fq_codel, edc0dd2)
	s = newSim()
	s.lineRead, s.knee, s.bidirShift = 0.985, 0.995, 0.015
	r, err = Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	shifted = newSim()
	shifted.knee -= s.bidirShift
	best = shifted.best(s.down, APlus)
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

// A server that vanishes mid-search ends it with the error; the caller
// restores the rates (cmd/sqmkit's tune does, and its test checks it).
func TestServerVanishes(t *testing.T) {
	for n := 1; n < 12; n++ {
		s := newSim()
		s.failAfter = n
		if _, err := Search(context.Background(), s, searchConfig()); err == nil || !strings.Contains(err.Error(), "server went away") {
			t.Errorf("after %d phases: %v", n, err)
		}
	}
}

func TestBorderlineMeasuredTwice(t *testing.T) {
	s := newSim()
	s.noiseMs, s.slopeMs = 0.5, 2 // a gentle knee: steps land near the bars
	r, err := Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, st := range r.Steps {
		m, p := st.AddedMedian, st.AddedP95
		if st.Again {
			again++
		}
		if st.Kind != Bidir && !st.Again && Unsure(APlus, m, p) {
			t.Errorf("borderline step measured once: %+v", st)
		}
	}
	if again == 0 {
		t.Error("no step was borderline; the test does not test")
	}
	// the bidirectional phase too: +4 ms added there is within a quarter
	// of the 5 ms bar
	s = newSim()
	s.bidirExtra = 3
	r, err = Search(context.Background(), s, searchConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range r.Steps {
		if st.Kind == Bidir && !st.Again && Unsure(APlus, st.AddedMedian, st.AddedP95) {
			t.Errorf("borderline bidirectional step measured once: %+v", st)
		}
	}
	if i := slices.IndexFunc(r.Steps, func(st Step) bool { return st.Kind == Bidir && st.Again }); i < 0 {
		t.Errorf("no bidirectional step measured twice: %+v", r.Steps)
	}
}

// A bounded search (a session's budget) never runs more steps than it
// was given, and spends what it has on the answer first: each direction's
// rate meets the target on the model, and with the steps the default
// budget leaves (14) it is as close to the best as an unbounded search.
func TestSearchBudget(t *testing.T) {
	unsettled := 0
	defer func() {
		if unsettled == 0 {
			t.Error("no borderline pass was left unsettled by a bound; the test does not test it")
		}
	}()
	for _, tc := range []struct {
		name  string
		setup func(*sim)
	}{
		{"monotone", func(*sim) {}},
		{"noisy", func(s *sim) { s.noiseMs = 1 }},
		{"knee low", func(s *sim) { s.knee = 0.85 }},
		{"not bloated", func(s *sim) { s.flat = true }},
		{"bidirectional lowers", func(s *sim) { s.knee, s.slopeMs, s.bidirShift = 0.95, 3, 0.06 }},
		{"gentle knee", func(s *sim) { s.slopeMs = 2 }},
	} {
		for _, steps := range []int{minSteps, 10, 12, 14, 20} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, steps), func(t *testing.T) {
				s := newSim()
				tc.setup(s)
				c := searchConfig()
				c.MaxSteps = steps
				r, err := Search(context.Background(), s, c)
				if got := s.phases - 2; got > steps {
					t.Errorf("%d steps, allowed %d", got, steps)
				}
				if err != nil {
					if !strings.Contains(err.Error(), "budget") || steps >= 14 {
						t.Fatalf("%d steps: %v", steps, err)
					}
					return
				}
				for _, st := range r.Steps {
					if st.Kind != Bidir && st.Pass && !st.Again && Unsure(APlus, st.AddedMedian, st.AddedP95) {
						t.Errorf("a borderline pass measured once was kept: %+v", st)
					}
					if st.Unsettled {
						unsettled++
					}
				}
				if steps == minSteps && !r.Download.Has(RuleBudgetBound) && !r.Upload.Has(RuleBudgetBound) {
					t.Errorf("the smallest bound did not bind: %q, %q", r.Download.Why, r.Upload.Why)
				}
				for _, d := range []struct {
					k    Kind
					c    Choice
					line float64
				}{{Download, r.Download, s.down}, {Upload, r.Upload, s.up}} {
					best := s.best(d.line, APlus)
					if s.flat {
						best = int(d.line)
					}
					if float64(d.c.RateKbit) > 1.01*float64(best) {
						t.Errorf("%s: chose %d kbit/s, above the best %d (%s)", d.k, d.c.RateKbit, best, d.c.Why)
					}
					if steps >= 14 && tc.name != "bidirectional lowers" && float64(d.c.RateKbit) < 0.97*float64(best) {
						t.Errorf("%s: chose %d kbit/s with %d steps, best is %d (%s)", d.k, d.c.RateKbit, steps, best, d.c.Why)
					}
				}
			})
		}
	}
}

// A step is measured twice only when a second phase could turn its
// verdict.
func TestUnsure(t *testing.T) {
	for _, tc := range []struct {
		med, p95 float64
		want     bool
	}{
		{1, 4, false},     // clear pass
		{4.5, 8, true},    // pass near the median's bar
		{2, 13, true},     // pass near the p95's bar
		{5.5, 10, true},   // a miss by a little
		{5.5, 17, true},   // by a little on both
		{10.5, 14, false}, // twice the median's bar, the p95 near its own
		{4, 25, false},    // a clear p95 miss
	} {
		if got := Unsure(APlus, tc.med, tc.p95); got != tc.want {
			t.Errorf("Unsure(+%.1f/+%.1f) = %v, want %v", tc.med, tc.p95, got, tc.want)
		}
	}
}

// A step that misses on its p95 alone, the median showing no standing
// queue, is measured again: a one-off burst passes on the mean of two, a
// tail that is the link's misses twice.
func TestTailMeasuredTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spikes int // loaded upload phases at 95 % that read +2.3/+23.3
		pass   bool
	}{
		{"one burst", 1, true},
		{"the link's tail", 99, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim()
			l := &tail{sim: s, k: Upload, from: 0.948, to: 0.952, left: tc.spikes}
			r, err := Search(context.Background(), l, searchConfig())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(r.Steps, func(st Step) bool { return st.Kind == Upload && math.Abs(st.Share-0.95) < 0.002 })
			if i < 0 {
				t.Fatalf("no upload step at 95 %%: %+v", r.Steps)
			}
			if st := r.Steps[i]; !st.Again || st.Pass != tc.pass {
				t.Errorf("upload at 95 %%: again %v pass %v, want again and pass %v (%+v)", st.Again, st.Pass, tc.pass, st)
			}
		})
	}
	for _, c := range []struct {
		med, p95 float64
		want     bool
	}{{2.3, 23.3, true}, {2.5, 40, true}, {2.6, 23.3, false}, {2, 14, false}} {
		if got := tailOnly(APlus, c.med, c.p95); got != c.want {
			t.Errorf("tailOnly(+%.1f/+%.1f) = %v, want %v", c.med, c.p95, got, c.want)
		}
	}
}

// tail makes the first left phases of kind k at a share of the line from
// from up to to read a p95 over the bar with a low median.
type tail struct {
	*sim
	k        Kind
	from, to float64
	left     int
}

func (l *tail) Load(ctx context.Context, k Kind, n Length) (Phase, error) {
	p, err := l.sim.Load(ctx, k, n)
	x := l.rateD / l.down
	if k == Upload {
		x = l.rateU / l.up
	}
	if k == l.k && n != LinePhase && l.left > 0 && x >= l.from && x < l.to {
		l.left--
		p.AddedMedian, p.AddedP95 = 2.3, 23.3
	}
	return p, err
}

// With the budget of a 3 minute tune (13 steps), the download has the
// larger half of the spare steps: a tail measured twice just under its
// knee leaves it one more bisection step, and the rate ends within 3 % of
// the knee (adsl-atm × nss, 88c1a70: 6732 kbit/s passed, 7086 missed,
// 6909 missed twice on the tail that an ingress shaper near the modem's
// rate leaves after a start-up, and the download ended at 96.7 % of the
// sweep's best).
func TestDownloadBudgetShare(t *testing.T) {
	s := newSim()
	s.down, s.knee, s.slopeMs = 7086, 0.985, 40
	l := &tail{sim: s, k: Download, from: 0.97, to: s.knee, left: 99}
	c := searchConfig()
	c.MaxSteps = 13
	r, err := Search(context.Background(), l, c)
	if err != nil {
		t.Fatal(err)
	}
	if knee := s.knee * s.down; float64(r.Download.RateKbit) < 0.97*knee {
		t.Errorf("download %d kbit/s, %.1f %% of the knee %.0f: %s", r.Download.RateKbit, 100*float64(r.Download.RateKbit)/knee, knee, r.Download.Why)
	}
}

// A knee at the measured line, or within lineError under it, is taken one
// step under the highest rate that passed; a knee farther below the line is
// that rate.
func TestUnderLine(t *testing.T) {
	for _, tc := range []struct {
		knee  float64 // the sim passes up to half a percent above it
		under bool
	}{{1, true}, {0.99, true}, {0.965, false}, {0.955, false}} {
		s := newSim()
		s.knee = tc.knee
		r, err := Search(context.Background(), s, searchConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []Kind{Download, Upload} {
			c := r.choice(k)
			line := c.Line.RateKbit
			best := 0
			for _, st := range r.Steps {
				if st.Kind == k && st.Pass && st.RateKbit <= line {
					best = max(best, st.RateKbit)
				}
			}
			want := best
			if tc.under {
				want -= int(math.Round(0.01 * float64(line)))
			}
			if under := c.Has(RuleUnderLine); under != tc.under || c.RateKbit != want {
				t.Errorf("knee %.3f, %s: %d of line %d (highest pass %d), want %d: %s", tc.knee, k, c.RateKbit, line, best, want, c.Why)
			}
		}
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
		{4.0, 1.6, true, false}, // make test at 1057a0c
		{0.5, 8.2, false, true},
		{1.5, 4.5, false, true},  // 75 % is the line: exactly there counts as the upload's
		{1.5, 4.0, true, false},  // 73 %: the download's
		{15.1, 25.1, true, true}, // fiber × cake, 2026-11-25
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
	// against A's 30 ms (adsl-atm × nss, 36911dc: 73 % upstream)
	if d, u := Queued(18.8, 51.7, 30); d || !u {
		t.Errorf("Queued(18.8, 51.7) against 30 ms = %v, %v; want the upload's", d, u)
	}
}

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
			if r.BidirTarget != A || !strings.Contains(r.BidirOutOfReach, "did not fall") || r.target(Bidir) != A || r.target(Download) != APlus {
				t.Errorf("bidirectional judged against %+v (%q), download against %+v", r.target(Bidir), r.BidirOutOfReach, r.target(Download))
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

// Search leaves the link at the rates it reports, also when the
// bidirectional check lowered them with no phase left to measure them:
// the confirming test measures the shaper as it is.
func TestSearchEndsAtItsRates(t *testing.T) {
	short := 0
	for steps := minSteps; steps <= 24; steps++ {
		s := newSim()
		s.bidirExtra, s.bidirUp = 2, true // the upload's queue, lowered a step at a time
		c := searchConfig()
		c.MaxSteps = steps
		r, err := Search(context.Background(), s, c)
		if err != nil {
			t.Fatalf("%d steps: %v", steps, err)
		}
		if r.Download.Has(RuleUnmeasured) || r.Upload.Has(RuleUnmeasured) || r.Download.Has(RuleEdgeAtLine) || r.Upload.Has(RuleEdgeAtLine) {
			short++
		}
		if s.rateD != float64(r.Download.RateKbit) || s.rateU != float64(r.Upload.RateKbit) {
			t.Errorf("%d steps: the link is at %v/%v, the report says %d/%d", steps, s.rateD, s.rateU, r.Download.RateKbit, r.Upload.RateKbit)
		}
	}
	if short == 0 {
		t.Error("no budget ended the bidirectional check with an unmeasured lowering; the test does not test")
	}
}

// wasLowered: the rate came down for the bidirectional phase, the confirming
// test, or a pass on the edge at the line.
func wasLowered(c Choice) bool {
	return c.Has(RuleLowered) || c.Has(RuleEdgeAtLine) || c.Has(RuleConfirmLowered)
}

// Every decision a Why tells in words is a Rule: a test can ask which
// rule a rate went through without matching prose (TestRulesMatchWhy).
func TestRulesMatchWhy(t *testing.T) {
	var c Choice
	c.because(RuleBisected, "the highest rate meeting %s", "A+")
	c.also(RuleUnderLine, "; one step under that")
	if c.Why != "the highest rate meeting A+; one step under that" || !c.Has(RuleBisected) || !c.Has(RuleUnderLine) || c.Has(RuleLowered) {
		t.Errorf("%q %v", c.Why, c.Rules)
	}
	c.because(RuleAtLine, "the line rate meets A+")
	if len(c.Rules) != 1 || c.Has(RuleBisected) {
		t.Errorf("because did not replace the rules: %v", c.Rules)
	}
}
