package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
)

// Recorded traces, in mahimahi's format (mahimahi's traces/, as
// ../shared/traces/mahimahi has them): one line per opportunity to deliver
// one 1500-byte packet across the bottleneck, the millisecond it falls in
// since the recording began; several in one millisecond repeat the line.
// NAME.down and NAME.up are one recording's two directions.

// Opportunity is the bytes one line of a mahimahi trace may deliver.
const Opportunity = 1500

// ReadMahimahi reads a recording's two directions into slots of step: a
// slot's capacity is its opportunities' bytes over the slot, and a slot
// without one is an outage (0), as the recording had it. The trace is as
// long as its shorter direction, in whole slots (TestReadMahimahi).
func ReadMahimahi(name string, down, up io.Reader, step time.Duration) (*Trace, error) {
	if step < time.Millisecond || step%time.Millisecond != 0 {
		return nil, fmt.Errorf("%s: a slot of %v: want whole milliseconds", name, step)
	}
	t := &Trace{Name: name, Step: step, Kind: "recorded (mahimahi)"}
	var err error
	if t.Down, err = slots(name+".down", down, step); err != nil {
		return nil, err
	}
	if t.Up, err = slots(name+".up", up, step); err != nil {
		return nil, err
	}
	n := min(len(t.Down), len(t.Up))
	if n == 0 {
		return nil, fmt.Errorf("%s: no opportunities", name)
	}
	t.Down, t.Up = t.Down[:n], t.Up[:n]
	return t, nil
}

// slots counts a direction's opportunities per slot of step and turns
// them into kbit/s; the last, partial slot is left out.
func slots(name string, r io.Reader, step time.Duration) ([]int, error) {
	ms := int(step / time.Millisecond)
	var count []int
	sc := bufio.NewScanner(r)
	line, last := 0, 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		at, err := strconv.Atoi(s)
		if err != nil || at < last {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond at or after %d", name, line, s, last)
		}
		last = at
		i := at / ms
		for len(count) <= i {
			count = append(count, 0)
		}
		count[i]++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(count) > 0 && (last+1)%ms != 0 {
		count = count[:len(count)-1] // the last slot is not whole
	}
	kbit := make([]int, len(count))
	for i, c := range count {
		kbit[i] = c * Opportunity * 8 / ms // bits per ms = kbit/s
	}
	return kbit, nil
}

// Load reads the trace at path: a recording's pair as "A.down,A.up" (in
// slots of step), else a generated trace file.
func Load(path string, step time.Duration) (*Trace, error) {
	if down, up, ok := strings.Cut(path, ","); ok {
		fd, err := os.Open(down)
		if err != nil {
			return nil, err
		}
		defer fd.Close()
		fu, err := os.Open(up)
		if err != nil {
			return nil, err
		}
		defer fu.Close()
		return ReadMahimahi(strings.TrimSuffix(filepath.Base(down), ".down"), fd, fu, step)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(strings.TrimSuffix(filepath.Base(path), ".trace"), f)
}

// Pairs are the recordings in dir: each NAME.down beside a NAME.up, as
// "DIR/NAME.down,DIR/NAME.up", sorted.
func Pairs(dir string) ([]string, error) {
	downs, err := filepath.Glob(filepath.Join(dir, "*.down"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range downs {
		u := strings.TrimSuffix(d, ".down") + ".up"
		if _, err := os.Stat(u); err == nil {
			out = append(out, d+","+u)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no NAME.down beside a NAME.up", dir)
	}
	slices.Sort(out)
	return out, nil
}

// Bounds are the floor, base and ceiling every controller gets on a trace,
// by the rule a router owner can follow with a speed test of their own
// run now and then: the rates it shows second by second (the trace's
// one-second means), the floor at their 10th percentile, the base at their
// median and the ceiling at their 90th. Not the trace's minimum and
// maximum: a recording's minimum is an outage (0), and its maximum a
// moment's burst, neither a rate anyone shapes to (TestBounds). No bound
// is under the least rate a shaper runs at (config.MinRateKbit): a
// drive's 10th percentile can be an outage's trickle, which no owner sets.
func Bounds(v []int, step time.Duration) (floor, base, ceiling int) {
	n := max(1, int(time.Second/step))
	var secs []float64
	for i := 0; i+n <= len(v); i += n {
		sum := 0
		for _, x := range v[i : i+n] {
			sum += x
		}
		secs = append(secs, float64(sum)/float64(n))
	}
	if len(secs) == 0 {
		_, m, _ := Stats(v)
		return m, m, m
	}
	slices.Sort(secs)
	q := func(p float64) int {
		return max(int(math.Round(secs[int(p*float64(len(secs)-1))])), config.MinRateKbit)
	}
	return q(0.1), q(0.5), q(0.9)
}
