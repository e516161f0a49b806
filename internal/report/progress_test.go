package report

import (
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

type update struct {
	phase     string
	elapsed   time.Duration
	down, up  float64
	latencyMs float64
}

// run feeds a 10 Hz stream of updates spanning two phases.
func run(p *Progress) []update {
	var us []update
	for i := 0; i <= 25; i++ {
		u := update{phase: "idle_before", elapsed: time.Duration(i) * 100 * time.Millisecond, latencyMs: 20}
		if i >= 12 {
			u.phase, u.down, u.up, u.latencyMs = "download", 94.25, 0.4, 245.5
		}
		if i == 0 {
			u.latencyMs = math.NaN()
		}
		us = append(us, u)
		p.Update(u.phase, u.elapsed, 30*time.Second, u.down, u.up, u.latencyMs)
	}
	p.Done()
	p.Update("late", 0, 0, 0, 0, 0)
	return us
}

func TestProgressPlain(t *testing.T) {
	var b strings.Builder
	run(NewProgress(&b, false))
	// Lines at the start, once a second within a phase and at each phase
	// change: t=0, 1.0 (idle), 1.2 (download), 2.2 (download).
	want := []string{
		"idle_before     0.0/30 s  down     0.0  up     0.0 Mbit/s  RTT      - ms",
		"idle_before     1.0/30 s  down     0.0  up     0.0 Mbit/s  RTT   20.0 ms",
		"download        1.2/30 s  down    94.2  up     0.4 Mbit/s  RTT  245.5 ms",
		"download        2.2/30 s  down    94.2  up     0.4 Mbit/s  RTT  245.5 ms",
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.ContainsAny(b.String(), "\r\x1b") {
		t.Error("plain output contains terminal control characters")
	}
}

func TestProgressTTY(t *testing.T) {
	var b strings.Builder
	us := run(NewProgress(&b, true))
	out := b.String()
	if strings.Contains(out, "\n") {
		t.Error("terminal output must redraw one line, found a newline")
	}
	frames := strings.Split(out, "\r\x1b[K")
	// A leading empty frame before the first redraw, one per update, and
	// the empty line Done leaves behind.
	if len(frames) != len(us)+2 || frames[0] != "" || frames[len(frames)-1] != "" {
		t.Fatalf("got %d frames, want %d: %q", len(frames), len(us)+2, out)
	}
	for _, f := range frames[1 : len(frames)-1] {
		if len(f) >= 80 {
			t.Errorf("frame %q is %d columns; it would wrap on an 80-column terminal", f, len(f))
		}
	}
	if last := frames[len(frames)-2]; !strings.HasPrefix(last, "download        2.5/30 s") {
		t.Errorf("last frame %q", last)
	}
}

func TestProgressConcurrent(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, true)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				p.Update("bidirectional", time.Duration(i*j)*time.Millisecond, time.Minute, 1, 2, 3)
			}
		}()
	}
	wg.Wait()
	p.Done()
	if n := strings.Count(b.String(), "bidirectional"); n != 200 {
		t.Errorf("%d frames, want 200", n)
	}
}

func TestIsTerminal(t *testing.T) {
	file, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	// A pseudo-terminal master is a terminal as far as tcgetattr goes.
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer pty.Close()
	for _, c := range []struct {
		name string
		w    io.Writer
		want bool
	}{{"file", file, false}, {"builder", &strings.Builder{}, false}, {"pty", pty, true}} {
		if got := IsTerminal(c.w); got != c.want {
			t.Errorf("IsTerminal(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
