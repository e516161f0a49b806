package search

import (
	"context"
	"math"
	"slices"
	"testing"
)

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
