package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Bounds of the per-packet overhead: cake's accepted range.
const (
	minOverhead = -64
	maxOverhead = 256
)

var adaptations = []string{"default", "cake", "htb_private", "tc_stab", "none"}

// CakeDiffservModes are the diffserv keywords cake accepts.
var CakeDiffservModes = []string{"besteffort", "diffserv3", "diffserv4", "diffserv8", "precedence"}

// CakeRTTPresets are cake's rtt keywords and the interval each sets.
var CakeRTTPresets = map[string]time.Duration{
	"datacentre":     100 * time.Microsecond,
	"lan":            time.Millisecond,
	"metro":          10 * time.Millisecond,
	"regional":       30 * time.Millisecond,
	"internet":       100 * time.Millisecond,
	"oceanic":        300 * time.Millisecond,
	"satellite":      time.Second,
	"interplanetary": 1000 * time.Second,
}

// Validate checks q as a start would use it. Each error names the UCI
// option and the flag that set it and says how to fix it.
func (q Queue) Validate() error {
	bad := func(opt, format string, args ...any) error {
		err := fieldError(q.Section, opt, format, args...)
		if o := q.Origin(opt); o != "" {
			return fmt.Errorf("%s: %w", o, err)
		}
		return err
	}
	if q.Interface == "" {
		return bad("interface", "no interface to shape")
	}
	if err := devName(q.Interface); err != nil {
		return bad("interface", "%v", err)
	}
	if q.Download < 0 {
		return bad("download", "%d kbit/s is negative; 0 means do not shape", q.Download)
	}
	if q.Upload < 0 {
		return bad("upload", "%d kbit/s is negative; 0 means do not shape", q.Upload)
	}
	if q.Download == 0 && q.Upload == 0 {
		return bad("download", "download and upload are both 0, so nothing would be shaped")
	}
	switch q.Backend {
	case NSS, Cake, FQCodel:
	default:
		return bad("backend", "%q is not a backend (use nss, cake or fq_codel)", q.Backend)
	}
	switch q.LinkLayer {
	case LinkNone, LinkEthernet, LinkATM:
	default:
		return bad("linklayer", "%q is not a link layer (use none, ethernet or atm)", q.LinkLayer)
	}
	if q.Overhead < minOverhead || q.Overhead > maxOverhead {
		return bad("overhead", "%d bytes is outside %d..%d", q.Overhead, minOverhead, maxOverhead)
	}
	if q.TcMPU < 0 || q.TcMPU > maxOverhead {
		return bad("tcMPU", "%d bytes is outside 0..%d", q.TcMPU, maxOverhead)
	}
	if q.ILimit < 0 {
		return bad("ilimit", "%d packets is negative", q.ILimit)
	}
	if q.ELimit < 0 {
		return bad("elimit", "%d packets is negative", q.ELimit)
	}
	if err := target(q.ITarget); err != nil {
		return bad("itarget", "%v", err)
	}
	if err := target(q.ETarget); err != nil {
		return bad("etarget", "%v", err)
	}
	if q.LinkLayerAdaptation != "" && !slices.Contains(adaptations, q.LinkLayerAdaptation) {
		return bad("linklayer_adaptation_mechanism", "%q is unknown (use one of %s)", q.LinkLayerAdaptation, strings.Join(adaptations, ", "))
	}
	if q.Diffserv != "" && !slices.Contains(CakeDiffservModes, q.Diffserv) {
		return bad("diffserv", "%q is not a cake diffserv mode (use one of %s)", q.Diffserv, strings.Join(CakeDiffservModes, ", "))
	}
	if _, preset := CakeRTTPresets[q.RTT]; q.RTT != "" && !preset {
		if d, err := time.ParseDuration(q.RTT); err != nil || d <= 0 {
			return bad("rtt", "%q is neither a duration like 100ms nor a preset (%s)", q.RTT, strings.Join(rttPresetNames(), ", "))
		}
	}
	if q.IFB != "" {
		if err := devName(q.IFB); err != nil {
			return bad("ifb", "%v", err)
		}
	}
	return nil
}

// target accepts what sqm-scripts accepts for itarget/etarget: empty
// (default), "auto", or a positive duration with a unit.
func target(v string) error {
	if v == "" || v == "auto" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is neither a duration like 5ms nor auto", v)
	}
	return nil
}

// devName applies the kernel's rules for network device names.
func devName(n string) error {
	if len(n) > 15 {
		return fmt.Errorf("%q is longer than the 15 bytes Linux allows for a device name", n)
	}
	if n == "." || n == ".." || strings.ContainsAny(n, "/: \t\n") {
		return fmt.Errorf("%q is not a valid Linux device name", n)
	}
	return nil
}

// rttPresetNames lists the presets shortest first, as cake's manual does.
func rttPresetNames() []string {
	return slices.SortedFunc(maps.Keys(CakeRTTPresets), func(a, b string) int {
		return cmp.Compare(CakeRTTPresets[a], CakeRTTPresets[b])
	})
}
