package report

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// plainEvery spaces the lines written when the output is not a terminal, so
// logs and CI output stay readable for a 30 s test updated ten times a second.
const plainEvery = time.Second

// Progress shows a running test: one line redrawn in place on a terminal,
// plain lines (at each phase change and at most once a second) otherwise.
// It is safe for concurrent use.
type Progress struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	done      bool
	lastPhase string
	lastLine  time.Duration // elapsed at the last plain line
}

// NewProgress writes progress to w; isTTY selects the redrawn line (see
// IsTerminal).
func NewProgress(w io.Writer, isTTY bool) *Progress {
	return &Progress{w: w, tty: isTTY, lastLine: -plainEvery}
}

// IsTerminal reports whether w is a terminal, the usual choice for isTTY.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Update shows the state of the test: the current phase, the time elapsed
// and the total of the whole test, the current goodput and latency (NaN or
// ≤ 0 when no probe has come back yet).
func (p *Progress) Update(phase string, elapsed, total time.Duration, downMbps, upMbps, latencyMs float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	line := fmt.Sprintf("%-13s %5.1f/%.0f s  down %7.1f  up %7.1f Mbit/s  RTT %s",
		phase, elapsed.Seconds(), total.Seconds(), downMbps, upMbps, latency(latencyMs))
	if p.tty {
		// \r and erase-line redraw in place; the line stays under 80
		// columns so it never wraps, which would break the redraw.
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		return
	}
	if phase == p.lastPhase && elapsed-p.lastLine < plainEvery {
		return
	}
	p.lastPhase, p.lastLine = phase, elapsed
	fmt.Fprintln(p.w, line)
}

// Done ends the display; on a terminal it clears the line so the summary
// starts on a clean one. Later Updates are ignored.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && !p.done {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.done = true
}

func latency(ms float64) string {
	if math.IsNaN(ms) || ms <= 0 {
		return "     - ms"
	}
	return fmt.Sprintf("%6.1f ms", ms)
}
