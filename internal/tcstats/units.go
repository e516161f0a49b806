package tcstats

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// splitNum splits "142500Kbit" into 142500 and "Kbit".
func splitNum(s string) (float64, string, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("%q: no number", s)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsInf(n, 0) {
		return 0, "", fmt.Errorf("%q: bad number", s)
	}
	return n, s[i:], nil
}

func scaled(n, mult float64, s string) (uint64, error) {
	v := n * mult
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("%q: out of range", s)
	}
	return uint64(math.Round(v)), nil
}

// ParseRate reads a tc rate ("145Mbit", "142500Kbit", "1Gbit", "64bit",
// "100mbit", "12Mibit", "1MBps") as bit/s. tc prints decimal SI prefixes.
func ParseRate(s string) (uint64, error) {
	n, unit, err := splitNum(s)
	if err != nil {
		return 0, err
	}
	u := strings.ToLower(unit)
	mult := 1.0
	bytes := false
	switch {
	case strings.HasSuffix(u, "bit"):
		u = strings.TrimSuffix(u, "bit")
	case strings.HasSuffix(u, "bps"):
		u, bytes = strings.TrimSuffix(u, "bps"), true
	case u == "":
		// tc treats a bare number as bytes per second.
		bytes = true
	default:
		return 0, fmt.Errorf("%q: unknown rate unit %q (want bit, Kbit, Mbit, Gbit)", s, unit)
	}
	iec := strings.HasSuffix(u, "i")
	u = strings.TrimSuffix(u, "i")
	base := 1000.0
	if iec {
		base = 1024
	}
	switch u {
	case "":
	case "k":
		mult = base
	case "m":
		mult = base * base
	case "g":
		mult = base * base * base
	case "t":
		mult = base * base * base * base
	default:
		return 0, fmt.Errorf("%q: unknown rate prefix", s)
	}
	if bytes {
		mult *= 8
	}
	return scaled(n, mult, s)
}

// ParseSize reads a tc size ("18432b", "1536b", "4Kb", "1Mb", "6250b/1")
// as bytes. tc prints sizes with binary prefixes; the "/cell_log" suffix
// tc -d adds is ignored.
func ParseSize(s string) (uint64, error) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	n, unit, err := splitNum(s)
	if err != nil {
		return 0, err
	}
	mult := 1.0
	switch strings.ToLower(unit) {
	case "", "b":
	case "k", "kb":
		mult = 1024
	case "m", "mb":
		mult = 1024 * 1024
	case "g", "gb":
		mult = 1024 * 1024 * 1024
	case "kbit":
		mult = 1024 / 8.0
	case "mbit":
		mult = 1024 * 1024 / 8.0
	default:
		return 0, fmt.Errorf("%q: unknown size unit %q (want b, Kb, Mb)", s, unit)
	}
	return scaled(n, mult, s)
}

// ParseTime reads a tc time ("4ms", "100us", "1s", "67.2ms", "10sec").
// A bare number is microseconds, as tc takes it.
func ParseTime(s string) (time.Duration, error) {
	n, unit, err := splitNum(s)
	if err != nil {
		return 0, err
	}
	var mult float64
	switch strings.ToLower(unit) {
	case "s", "sec", "secs":
		mult = float64(time.Second)
	case "ms", "msec", "msecs":
		mult = float64(time.Millisecond)
	case "", "us", "usec", "usecs":
		mult = float64(time.Microsecond)
	case "ns", "nsec", "nsecs":
		mult = 1
	default:
		return 0, fmt.Errorf("%q: unknown time unit %q (want s, ms, us)", s, unit)
	}
	v := n * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: out of range", s)
	}
	return time.Duration(math.Round(v)), nil
}

// ParsePackets reads a packet count ("354p", "1024").
func ParsePackets(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSuffix(s, "p"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: not a packet count", s)
	}
	return n, nil
}

// Duration returns option key as a time.
func (r *Record) Duration(key string) (time.Duration, bool) { return value(r, key, ParseTime) }
