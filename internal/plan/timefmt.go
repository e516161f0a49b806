package plan

import (
	"fmt"
	"time"
)

// tcTime formats d for tc: whole milliseconds as "5ms", else microseconds.
func tcTime(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return fmt.Sprintf("%dus", d/time.Microsecond)
}
