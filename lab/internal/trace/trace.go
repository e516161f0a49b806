// Package trace is the lab's capacity traces: a link whose rate moves,
// replayed on the modem (its tbf's rate changed every step) so a
// controller that follows capacity (sqmkit autorate, cake-autorate) can be
// measured against the same moving link as a static shaper.
//
// Two kinds: the traces under lab/traces are generated here from a name
// and a seed (`sqmkit-lab traces` writes them; a test checks the files are
// what the generator makes), so every number in them can be reproduced;
// recorded ones are read from mahimahi's format (ReadMahimahi), the
// field's yardstick, measured on real cellular networks.
package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Step is the time between two capacity points of a generated trace: the
// modem's rate changes every 100 ms, about as often as an LTE scheduler's
// allocation settles.
const Step = 100 * time.Millisecond

// Trace is a capacity per step, per direction, in kbit/s.
type Trace struct {
	Name     string
	Seed     uint64
	Down, Up []int
	// Step is the time between two points (Step for a generated trace, a
	// recorded one's slot).
	Step time.Duration
	// Kind says where the trace comes from: "generated (seed N)", or
	// "recorded (mahimahi)" (Recorded).
	Kind string
}

// Recorded says whether the trace was measured on a real link (mahimahi's
// format): its slots carry delivery opportunities, and a slot without one
// is an outage, not a low rate.
func (t *Trace) Recorded() bool { return strings.HasPrefix(t.Kind, "recorded") }

// Duration is the trace's length.
func (t *Trace) Duration() time.Duration { return time.Duration(len(t.Down)) * t.Step }

// At is the capacity at time d (the last point after the end).
func (t *Trace) At(d time.Duration) (down, up int) {
	i := max(0, min(int(d/t.Step), len(t.Down)-1))
	return t.Down[i], t.Up[i]
}

// Cut keeps the trace's first d (all of it when d is 0). A recording
// shorter than d repeats from its start, as mahimahi's link does; a
// generated trace is all there is of it.
func (t *Trace) Cut(d time.Duration) {
	n := int(d / t.Step)
	for t.Recorded() && len(t.Down) > 0 && n > len(t.Down) {
		t.Down, t.Up = append(t.Down, t.Down...), append(t.Up, t.Up...)
	}
	if n > 0 && n < len(t.Down) {
		t.Down, t.Up = t.Down[:n], t.Up[:n]
	}
}

// Stats are a direction's minimum, mean and maximum.
func Stats(v []int) (lo, mean, hi int) {
	lo, hi = math.MaxInt, 0
	sum := 0
	for _, x := range v {
		lo, hi, sum = min(lo, x), max(hi, x), sum+x
	}
	return lo, sum / max(len(v), 1), hi
}

// SustainedMin is the lowest capacity held for a second: the minimum of
// the moving one-second means of v, a point every step. A dropout
// (starlink's: 100–400 ms at 0) is not a rate anyone would shape to
// (TestSustainedMin).
func SustainedMin(v []int, step time.Duration) int {
	n := int(time.Second / step)
	if len(v) < n {
		lo, _, _ := Stats(v)
		return lo
	}
	sum := 0
	for _, x := range v[:n] {
		sum += x
	}
	lo := sum
	for i := n; i < len(v); i++ {
		sum += v[i] - v[i-n]
		lo = min(lo, sum)
	}
	return lo / n
}

// Names are the generated traces, with their seeds.
var Names = map[string]uint64{"lte": 1, "starlink": 2, "cable-evening": 3, "steady": 4}

// Length of every generated trace: long enough for a controller to show
// both its convergence and its steady state, short enough that the lab
// runs every trace × every controller within `make lab`.
const Length = 180 * time.Second

// Generate makes trace name from seed.
func Generate(name string, seed uint64) (*Trace, error) {
	n := int(Length / Step)
	t := &Trace{Name: name, Seed: seed, Down: make([]int, n), Up: make([]int, n), Step: Step, Kind: fmt.Sprintf("generated (seed %d)", seed)}
	rng := rand.New(rand.NewPCG(seed, 0x5157))
	switch name {
	case "lte":
		// Fast random variation, 5–60 Mbit/s down and 2–15 up: a random
		// walk in log space (the scheduler's share moves by ratios, not
		// by fixed amounts), pulled back to the middle, one step per
		// 100 ms; the two directions move independently.
		walk := func(lo, hi float64, out []int) {
			l, h := math.Log(lo), math.Log(hi)
			x := (l + h) / 2
			for i := range out {
				x += rng.NormFloat64()*0.06 + 0.01*((l+h)/2-x)
				x = math.Max(l, math.Min(h, x))
				out[i] = int(math.Exp(x))
			}
		}
		walk(5000, 60000, t.Down)
		walk(2000, 15000, t.Up)
	case "starlink":
		// A new satellite every 15 s: capacity steps to a new level
		// (20–80 Mbit/s down, 4–15 up: Starlink's shape at the rates the
		// emulated guest forwards), and with a handover a dropout of
		// 100–400 ms in a third of them.
		var down, up int
		for i := range t.Down {
			if i%150 == 0 {
				down, up = 20000+rng.IntN(60000), 4000+rng.IntN(11000)
				if i > 0 && rng.IntN(3) == 0 {
					for j := i; j < min(i+1+rng.IntN(4), n); j++ {
						t.Down[j], t.Up[j] = 100, 100
					}
				}
			}
			if t.Down[i] == 0 {
				t.Down[i], t.Up[i] = down, up
			}
		}
	case "cable-evening":
		// A shared cable segment in the evening, compressed: from
		// 40/8 Mbit/s down to 40 % of it and back, slowly (a raised
		// cosine), with a little noise.
		for i := range t.Down {
			x := 0.7 + 0.3*math.Cos(2*math.Pi*float64(i)/float64(n))
			x *= 1 + 0.02*rng.NormFloat64()
			x = math.Max(0.4, math.Min(1, x))
			t.Down[i], t.Up[i] = int(40000*x), int(8000*x)
		}
	case "steady":
		// Constant 40/8: what autorate costs on a good line.
		for i := range t.Down {
			t.Down[i], t.Up[i] = 40000, 8000
		}
	default:
		return nil, fmt.Errorf("no trace %q (have lte, starlink, cable-evening, steady)", name)
	}
	return t, nil
}

// Write stores t: a header, then "ms down_kbit up_kbit" per step.
func (t *Trace) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# sqmkit lab capacity trace %q, seed %d: `sqmkit-lab traces` writes it (lab/internal/trace)\n# ms down_kbit up_kbit, every %v\n", t.Name, t.Seed, Step)
	for i := range t.Down {
		fmt.Fprintf(bw, "%d %d %d\n", i*int(Step/time.Millisecond), t.Down[i], t.Up[i])
	}
	return bw.Flush()
}

// Read parses a trace file; lines must be Step apart from 0.
func Read(name string, r io.Reader) (*Trace, error) {
	t := &Trace{Name: name, Step: Step, Kind: "generated"}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"ms down_kbit up_kbit\", got %q", name, line, s)
		}
		var v [3]int
		for i := range f {
			n, err := strconv.Atoi(f[i])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s:%d: %q is not a whole non-negative number", name, line, f[i])
			}
			v[i] = n
		}
		if want := len(t.Down) * int(Step/time.Millisecond); v[0] != want {
			return nil, fmt.Errorf("%s:%d: time %d ms, want %d (one line every %v)", name, line, v[0], want, Step)
		}
		if v[1] < 64 || v[2] < 64 {
			v[1], v[2] = max(v[1], 64), max(v[2], 64) // tbf needs a rate; a dropout is 64 kbit/s
		}
		t.Down, t.Up = append(t.Down, v[1]), append(t.Up, v[2])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.Down) == 0 {
		return nil, fmt.Errorf("%s: no capacity lines", name)
	}
	if seed, ok := Names[name]; ok {
		t.Seed, t.Kind = seed, fmt.Sprintf("generated (seed %d)", seed)
	}
	return t, nil
}
