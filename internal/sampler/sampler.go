// Package sampler reads something at a fixed interval while a test runs:
// the shaper's counters (onpath), the CPU's (cpuload).
package sampler

import "time"

// Every calls read at once, every interval, and once more when stop is
// closed, and returns what the reads returned; a failed read is skipped.
func Every[T any](stop <-chan struct{}, every time.Duration, read func() (T, error)) []T {
	var out []T
	take := func() {
		if v, err := read(); err == nil {
			out = append(out, v)
		}
	}
	take()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			take()
			return out
		case <-t.C:
			take()
		}
	}
}
