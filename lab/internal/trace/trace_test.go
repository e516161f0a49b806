package trace

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Each generated trace has the shape its name promises.
func TestGenerate(t *testing.T) {
	for name, seed := range Names {
		tr, err := Generate(name, seed)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Duration() != Length {
			t.Errorf("%s: %v long", name, tr.Duration())
		}
		dlo, dmean, dhi := Stats(tr.Down)
		ulo, _, uhi := Stats(tr.Up)
		switch name {
		case "lte":
			if dlo < 5000 || dhi > 60000 || ulo < 2000 || uhi > 15000 || dhi-dlo < 30000 {
				t.Errorf("lte: down %d..%d up %d..%d", dlo, dhi, ulo, uhi)
			}
			// fast: the median change per second is more than a tenth
			big := 0
			for i := 10; i < len(tr.Down); i += 10 {
				if r := float64(tr.Down[i]) / float64(tr.Down[i-10]); r > 1.1 || r < 0.9 {
					big++
				}
			}
			if big < len(tr.Down)/20 {
				t.Errorf("lte: only %d of %d seconds moved by 10 %%", big, len(tr.Down)/10)
			}
		case "starlink":
			drops, steps := 0, 0
			for i := 1; i < len(tr.Down); i++ {
				if tr.Down[i] <= 100 && tr.Down[i-1] > 100 {
					drops++
				}
				if tr.Down[i] != tr.Down[i-1] && tr.Down[i] > 100 && tr.Down[i-1] > 100 {
					steps++
					if i%150 != 0 {
						t.Errorf("starlink: a step at %d, not on a 15 s boundary", i)
					}
				}
			}
			if drops == 0 || steps < 5 {
				t.Errorf("starlink: %d dropouts, %d steps", drops, steps)
			}
		case "cable-evening":
			if dhi < 38000 || dlo > 17000 || dlo < 16000 {
				t.Errorf("cable-evening: down %d..%d", dlo, dhi)
			}
		case "steady":
			if dlo != 40000 || dhi != 40000 || dmean != 40000 || ulo != 8000 || uhi != 8000 {
				t.Errorf("steady: %d..%d / %d..%d", dlo, dhi, ulo, uhi)
			}
		}
	}
	if _, err := Generate("dialup", 1); err == nil {
		t.Error("an unknown trace was generated")
	}
}

// The shipped files are exactly what the generator makes from their seeds.
func TestShippedTraces(t *testing.T) {
	for name, seed := range Names {
		tr, _ := Generate(name, seed)
		var want bytes.Buffer
		tr.Write(&want)
		got, err := os.ReadFile(filepath.Join("../../traces", name+".trace"))
		if err != nil {
			t.Fatalf("%v (sqmkit-lab traces writes it)", err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("lab/traces/%s.trace is not what the generator makes from seed %d: run sqmkit-lab traces", name, seed)
		}
		back, err := Read(name, bytes.NewReader(got))
		if err != nil || len(back.Down) != len(tr.Down) || back.Down[17] != max(tr.Down[17], 64) {
			t.Errorf("%s: read back %v", name, err)
		}
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0 1000\n", `x:1: want "ms down_kbit up_kbit"`},
		{"0 1000 500\n200 1000 500\n", "x:2: time 200 ms, want 100"},
		{"0 fast 500\n", `x:1: "fast" is not a whole non-negative number`},
		{"# nothing\n", "x: no capacity lines"},
	} {
		if _, err := Read("x", strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestSustainedMin(t *testing.T) {
	second := func(v int) []int { return []int{v, v, v, v, v, v, v, v, v, v} }
	for _, tc := range []struct {
		name string
		v    []int
		want int
	}{
		{"flat", second(40000), 40000},
		{"a dropout inside a level", append(append(second(20000), 0, 0, 0), second(20000)...), 14000},
		{"a lower level that lasts", append(second(30000), second(10000)...), 10000},
		{"shorter than a second", []int{5, 3, 9}, 3},
	} {
		if got := SustainedMin(tc.v, Step); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestReadMahimahi: opportunities per slot become kbit/s (one 1500-byte
// packet in 10 ms is 1200 kbit/s), a slot without one is an outage (0),
// the pair is as long as its shorter direction, the last partial slot is
// left out, and a line out of order is refused.
func TestReadMahimahi(t *testing.T) {
	down := "1\n1\n5\n25\n25\n25\n31\n"
	up := "0\n15\n19\n29\n"
	tr, err := ReadMahimahi("x", strings.NewReader(down), strings.NewReader(up), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// down: slots 0-9 (3), 10-19 (0), 20-29 (3), 30-39 partial: left out
	if want := []int{3600, 0, 3600}; !slices.Equal(tr.Down, want) || !slices.Equal(tr.Up, []int{1200, 2400, 1200}) {
		t.Errorf("down %v up %v", tr.Down, tr.Up)
	}
	if !tr.Recorded() || tr.Duration() != 30*time.Millisecond {
		t.Errorf("%+v", tr)
	}
	if _, err := ReadMahimahi("x", strings.NewReader("5\n3\n"), strings.NewReader(up), 10*time.Millisecond); err == nil {
		t.Error("a line out of order read")
	}
}

// TestRecordings: the recorded pairs in ../shared/traces/mahimahi read
// with the means their README gives, and each has outages (a recording's
// minimum is 0, not a rate): what Bounds' rule is for.
func TestRecordings(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "shared", "traces", "mahimahi")
	pairs, err := Pairs(dir)
	if err != nil {
		t.Skipf("no recordings here (%v): they are read from ../shared/traces", err)
	}
	want := map[string][2]float64{"Verizon-LTE-short": {5.0, 5.9}, "TMobile-LTE-short": {16.7, 13.3}, "ATT-LTE-driving": {5.2, 0.8}}
	for _, p := range pairs {
		tr, err := Load(p, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		_, dmean, _ := Stats(tr.Down)
		_, umean, _ := Stats(tr.Up)
		w, ok := want[tr.Name]
		if !ok || math.Abs(float64(dmean)/1000-w[0]) > 0.15 || math.Abs(float64(umean)/1000-w[1]) > 0.15 {
			t.Errorf("%s: mean %d/%d kbit/s, want %v Mbit/s", tr.Name, dmean, umean, w)
		}
		if lo, _, _ := Stats(tr.Down); lo != 0 {
			t.Errorf("%s: no outage in the download (minimum %d)", tr.Name, lo)
		}
		floor, base, ceil := Bounds(tr.Down, tr.Step)
		if !(0 < floor && floor < base && base < ceil) {
			t.Errorf("%s: bounds %d < %d < %d", tr.Name, floor, base, ceil)
		}
	}
}

// TestBounds: the floor, base and ceiling are the 10th, 50th and 90th
// percentiles of the one-second means, whatever one slot holds.
func TestBounds(t *testing.T) {
	var v []int
	for s := range 10 { // ten seconds at 1000, 2000, ..., 10000, each with an outage slot
		for i := range 100 {
			x := (s + 1) * 1000
			if i == 0 {
				x = 0
			}
			v = append(v, x*100/99)
		}
	}
	near := func(a, b int) bool { return a-b <= 1 && b-a <= 1 }
	if f, b, c := Bounds(v, 10*time.Millisecond); !near(f, 1000) || !near(b, 5000) || !near(c, 9000) {
		t.Errorf("bounds %d/%d/%d, want 1000/5000/9000", f, b, c)
	}
	// a link in outage most of its seconds: no bound under a shaper's least
	out := make([]int, 1000)
	out[999] = 100000
	if f, b, c := Bounds(out, 10*time.Millisecond); f != config.MinRateKbit || b != config.MinRateKbit || c < f {
		t.Errorf("an outage's bounds %d/%d/%d, want none under %d", f, b, c, config.MinRateKbit)
	}
}

// TestCutLoops: a recording cut longer than it repeats from its start (a
// tune on a 140 s recording needs more), a generated trace does not, and
// a shorter cut keeps the first slots.
func TestCutLoops(t *testing.T) {
	rec := &Trace{Down: []int{1, 2, 3}, Up: []int{4, 5, 6}, Step: time.Second, Kind: "recorded (mahimahi)"}
	rec.Cut(7 * time.Second)
	if want := []int{1, 2, 3, 1, 2, 3, 1}; !slices.Equal(rec.Down, want) || len(rec.Up) != len(want) || rec.Up[6] != 4 {
		t.Errorf("recording cut to 7 s: %v / %v", rec.Down, rec.Up)
	}
	gen := &Trace{Down: []int{1, 2, 3}, Up: []int{4, 5, 6}, Step: time.Second, Kind: "generated (seed 1)"}
	gen.Cut(7 * time.Second)
	if len(gen.Down) != 3 {
		t.Errorf("generated trace cut to 7 s: %v", gen.Down)
	}
	gen.Cut(2 * time.Second)
	if !slices.Equal(gen.Down, []int{1, 2}) {
		t.Errorf("cut to 2 s: %v", gen.Down)
	}
}
