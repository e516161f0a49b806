package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

// result is the JSON each scenario (profile × backend) writes.
type result struct {
	Profile string `json:"profile"`
	Backend string `json:"backend"`
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	Kernel  string `json:"kernel,omitempty"` // the guest's kernel release
	// pass, fail, limitation (a known physical limit), inconclusive (the
	// host kept the guest too busy to grade), unproven (every bar met but
	// one the guest's headroom kept from being graded), error
	Status     string `json:"status"`
	Limitation string `json:"limitation,omitempty"`
	Error      string `json:"error,omitempty"`
	// Shaper rates sqmkit was configured with (95 % of the line), kbit/s.
	DownKbit int `json:"download_kbit,omitempty"`
	UpKbit   int `json:"upload_kbit,omitempty"`

	Test   *accept.Measurement `json:"test,omitempty"`       // the grade (sqmkit test)
	Cross  *accept.Measurement `json:"crosscheck,omitempty"` // iperf3 + irtt on the same path
	Checks []accept.Check      `json:"checks"`
	// Discarded are phase measurements the noise gauge threw away, or
	// that missed their bars on a probe flow's collision (noisegate.go);
	// Test holds the ones that replaced them.
	Discarded []discarded `json:"discarded,omitempty"`
	// FirstTry is the error of an inconclusive first pass this result
	// replaced (secondPass); its discarded measurements lead Discarded.
	FirstTry    string          `json:"first_try,omitempty"`
	Start       *startCost      `json:"start_cost,omitempty"`
	Cost        *shaperCost     `json:"shaper_cost,omitempty"`
	Tune        *tuned          `json:"tune,omitempty"`
	Sweep       *swept          `json:"sweep,omitempty"`
	Trace       *traced         `json:"trace,omitempty"`
	TraceTune   *tunedTrace     `json:"trace_tune,omitempty"`
	AB          *abResult       `json:"ab,omitempty"`
	Journey     *journeyResult  `json:"journey,omitempty"`
	RPM         *rpmResult      `json:"rpm,omitempty"`
	CrossChecks []accept.Check  `json:"crosschecks,omitempty"`
	Doctor      json.RawMessage `json:"doctor,omitempty"`
	Dir         string          `json:"dir"`
}

// ended records how a scenario's run ended: a host too busy to grade
// is inconclusive, any other error is the scenario's.
func (r *result) ended(err error) {
	var inc *inconclusive
	switch {
	case errors.As(err, &inc):
		r.Status, r.Error = "inconclusive", err.Error()
	case err != nil:
		r.Status, r.Error = "error", err.Error()
	}
}

// limited records the profile's limitation for the backend, and calls a
// failed scenario a limitation when every miss is one the link's physics
// can cause: a tune that misses the sweep's band or its time on such a
// link still fails.
func (r *result) limited(limitation string) {
	r.Limitation = limitation
	if r.Status == "fail" && limitation != "" && accept.OnlyLink(r.Checks) {
		r.Status = "limitation"
	}
}

// line is the scenario's one-line verdict; an inconclusive one's error
// already begins with the word.
func (r *result) line() string {
	if r.Status == "inconclusive" {
		return summaryLine(r)[2:]
	}
	if s := shownStatus(*r); s != r.Status {
		return s + summaryLine(r) // "bloated, as expected", not PASS beside a grade D
	}
	return strings.ToUpper(r.Status) + summaryLine(r)
}

func summaryLine(r *result) string {
	if r.Error != "" {
		return ": " + r.Error
	}
	var b strings.Builder
	if r.FirstTry != "" {
		b.WriteString(" (second pass: the first was inconclusive)")
	}
	if n := len(r.Discarded); n > 0 {
		fmt.Fprintf(&b, " (%d phase measurement(s) discarded: %s)", n, discardedKinds(r.Discarded))
	}
	if r.Test != nil {
		fmt.Fprintf(&b, " grade %s (%s)", r.Test.Grade, r.Test.Tool)
		for _, p := range r.Test.Phases {
			fmt.Fprintf(&b, " | %s %s/%s ms", p.Name, bbresult.Signed(p.AddedMedian, 1), bbresult.Signed(p.AddedP95, 1))
			if p.AddedP95First != nil {
				fmt.Fprintf(&b, " (first 10 s p95 %s)", bbresult.Signed(*p.AddedP95First, 1))
			}
			fmt.Fprintf(&b, " %.1f/%.1f Mbit/s", p.DownMbps, p.UpMbps)
			if p.Collision != "" {
				b.WriteString(" (a probe flow collided)")
			}
			if p.Again != "" {
				b.WriteString(" (borderline: mean of two)")
			}
			if p.GoodputUnproven != "" {
				b.WriteString(" (goodput not graded: " + causeStarved + ")")
			}
			if p.Noise != nil && p.Noise.Busy > 0 {
				// every line carries the guest's headroom, so CI logs show
				// how close a runner's guest comes to maxBusy
				fmt.Fprintf(&b, " vCPUs %.0f%%", 100*p.Noise.Busy)
			}
		}
	}
	failed := false
	for _, c := range r.Checks {
		if !c.OK {
			b.WriteString("\n    " + c.String())
			failed = true
		}
	}
	// A failed grade carries what the host did meanwhile, so a CI log alone
	// tells a noisy runner from a regression.
	if failed && r.Test != nil {
		for _, p := range r.Test.Phases {
			if p.Noise != nil {
				fmt.Fprintf(&b, "\n    host during %s: other processes and steal %.1f%% of the CPU (gate %.0f%%), vCPUs ran %.0f%% and waited %.1f%%, worst %.1f ms per %v",
					p.Name, 100*p.Noise.Foreign, 100*maxForeign, 100*p.Noise.Busy, 100*p.Noise.Steal, p.Noise.Max, noise.Period)
			}
		}
	}
	return b.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// writeJSON writes v to path, and says so on stderr when it cannot: most
// callers go on without the file, and a value JSON cannot hold (a NaN) once
// lost every result of a run without a word.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: writing %s: %v\n", path, err)
	}
	return err
}

func failedNames(cs []accept.Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, fmt.Sprintf("%s %.1f", c.Name, c.Got))
		}
	}
	return strings.Join(out, ", ")
}

// discardedKinds counts the discarded measurements by cause.
func discardedKinds(ds []discarded) string {
	var out []string
	for _, cause := range []string{causeNoise, causeCollision, causeStarved} {
		n := 0
		for _, d := range ds {
			if d.Cause == cause {
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, cause))
		}
	}
	return strings.Join(out, ", ")
}
