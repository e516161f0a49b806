package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseTCTime reads a time the way tc does: a decimal number with an
// optional unit s/sec/secs, ms/msec/msecs or us/usec/usecs; no unit means
// microseconds.
func parseTCTime(s string) (time.Duration, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a tc time (e.g. 5ms, 500us)", s)
	}
	var scale time.Duration
	switch unit {
	case "s", "sec", "secs":
		scale = time.Second
	case "ms", "msec", "msecs":
		scale = time.Millisecond
	case "", "us", "usec", "usecs":
		scale = time.Microsecond
	default:
		return 0, fmt.Errorf("%q has unit %q; tc takes s, ms or us", s, unit)
	}
	return time.Duration(v * float64(scale)), nil
}

// tcTime formats d for tc: whole milliseconds as "5ms", else microseconds.
func tcTime(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return fmt.Sprintf("%dus", d/time.Microsecond)
}
