package sampler

import (
	"errors"
	"testing"
	"time"
)

// A read at start, on every tick and at stop; failed reads are skipped.
func TestEvery(t *testing.T) {
	stop := make(chan struct{})
	n := 0
	done := make(chan []int)
	go func() {
		done <- Every(stop, time.Millisecond, func() (int, error) {
			n++
			if n%2 == 0 {
				return 0, errors.New("skipped")
			}
			if n >= 7 {
				select {
				case <-stop:
				default:
					close(stop)
				}
			}
			return n, nil
		})
	}()
	got := <-done
	if len(got) < 4 || got[0] != 1 {
		t.Fatalf("read %v", got)
	}
	for _, v := range got {
		if v%2 == 0 {
			t.Errorf("a failed read was kept: %v", got)
		}
	}
}
