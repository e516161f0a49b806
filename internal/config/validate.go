package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/sqmkit/sqmkit/internal/tcstats"
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

// Rate bounds in kbit/s: below the minimum not even one full packet per
// 200 ms fits; above the maximum the value is a typo (bit/s for kbit/s).
const (
	MinRateKbit = 64
	MaxRateKbit = 100_000_000
)

// Plausible rates: what a broadband line carries. Outside them a rate is
// more often a unit slip (95 typed for 95 Mbit/s) than a line, so it is
// applied as given with a warning (TestRateWarnings).
const (
	PlausibleMinKbit = 1000
	PlausibleMaxKbit = 10_000_000
)

// RateWarnings says which of q's rates are implausible, in words that
// spell the unit out; nil when both are plausible or 0.
func (q Queue) RateWarnings() []string {
	var out []string
	for _, r := range []struct {
		opt string
		v   int
	}{{"download", q.Download}, {"upload", q.Upload}} {
		switch {
		case r.v > 0 && r.v < PlausibleMinKbit:
			out = append(out, fmt.Sprintf("%s %d kbit/s is under 1 Mbit/s: right for a slow DSL upload, but rates are in kbit/s, so %d Mbit/s would be %d", r.opt, r.v, r.v, r.v*1000))
		case r.v > PlausibleMaxKbit:
			out = append(out, fmt.Sprintf("%s %d kbit/s is over 10 Gbit/s: rates are in kbit/s, so this is %g Gbit/s (95 Mbit/s is 95000)", r.opt, r.v, float64(r.v)/1e6))
		}
	}
	return out
}

// Validate checks q as a start would use it: the one validation of a queue,
// whatever set its values. The error is a *FieldError naming the UCI option,
// the flag and the file line that set it, and how to fix it. What only the
// device can tell (its MTU, a wireguard interface) plan.Build checks.
func (q Queue) Validate() error {
	if q.Interface == "" {
		return q.Bad("interface", "", "no interface to shape")
	}
	if err := devName(q.Interface); err != nil {
		return q.Bad("interface", q.Interface, "%v", err)
	}
	for _, r := range []struct {
		opt string
		v   int
	}{{"download", q.Download}, {"upload", q.Upload}} {
		switch {
		case r.v < 0:
			return q.Bad(r.opt, r.v, "%d kbit/s is negative; use 0 to leave that direction unshaped", r.v)
		case r.v > 0 && r.v < MinRateKbit:
			return q.Bad(r.opt, r.v, "%d kbit/s is below the %d kbit/s minimum; raise it or set 0 to leave that direction unshaped", r.v, MinRateKbit)
		case r.v > MaxRateKbit:
			return q.Bad(r.opt, r.v, "%d kbit/s is above %d kbit/s; rates are in kbit/s (95000 is 95 Mbit/s)", r.v, MaxRateKbit)
		}
	}
	if q.Download == 0 && q.Upload == 0 {
		return q.Bad("download", 0, "download and upload are both 0, so nothing would be shaped")
	}
	switch q.Backend {
	case NSS, Cake, FQCodel:
	default:
		return q.Bad("backend", q.Backend, "%q is not a backend (use nss, cake or fq_codel)", q.Backend)
	}
	switch q.LinkLayer {
	case "", LinkNone, LinkEthernet: // "": a queue built in code, as none
	case LinkATM:
		if q.Backend == NSS {
			return q.Bad("linklayer", q.LinkLayer, "atm needs a size table, which nss cannot do; use backend cake, or linklayer ethernet with the ATM framing in overhead and rates under what ATM carries of the sync rate (48 bytes of every 53-byte cell, a full-size packet padded to 32 cells: about 85 %%), which sqmkit tune finds")
		}
	default:
		return q.Bad("linklayer", q.LinkLayer, "%q is not a link layer (use none, ethernet or atm)", q.LinkLayer)
	}
	if q.Overhead < minOverhead || q.Overhead > maxOverhead {
		return q.Bad("overhead", q.Overhead, "%d bytes is outside %d..%d", q.Overhead, minOverhead, maxOverhead)
	}
	if q.TcMPU < 0 || q.TcMPU > maxOverhead {
		return q.Bad("tcMPU", q.TcMPU, "%d bytes is outside 0..%d", q.TcMPU, maxOverhead)
	}
	for _, n := range []struct {
		opt, unit string
		v         int
	}{{"tcMTU", "bytes", q.TcMTU}, {"tcTSIZE", "entries", q.TcTSIZE}, {"ilimit", "packets", q.ILimit}, {"elimit", "packets", q.ELimit}} {
		if n.v < 0 {
			return q.Bad(n.opt, n.v, "%d %s is negative; use 0 for the computed value", n.v, n.unit)
		}
	}
	for _, t := range []struct{ opt, v string }{{"itarget", q.ITarget}, {"etarget", q.ETarget}} {
		if t.v != "" && t.v != "auto" && !isTCTime(t.v) {
			return q.Bad(t.opt, t.v, "%q is neither a duration like 5ms nor auto", t.v)
		}
	}
	if q.LinkLayerAdaptation != "" && !slices.Contains(adaptations, q.LinkLayerAdaptation) {
		return q.Bad("linklayer_adaptation_mechanism", q.LinkLayerAdaptation, "%q is unknown (use one of %s)", q.LinkLayerAdaptation, strings.Join(adaptations, ", "))
	}
	if q.Diffserv != "" && !slices.Contains(CakeDiffservModes, q.Diffserv) {
		return q.Bad("diffserv", q.Diffserv, "%q is not a cake diffserv mode (use one of %s)", q.Diffserv, strings.Join(CakeDiffservModes, ", "))
	}
	if v := TrimRTT(q.RTT); v != "" {
		if _, preset := CakeRTTPresets[v]; !preset && !isTCTime(v) {
			return q.Bad("rtt", q.RTT, "%q is neither a duration like 100ms nor a preset (%s)", q.RTT, strings.Join(rttPresetNames(), ", "))
		}
	}
	if q.IFB != "" {
		if err := devName(q.IFB); err != nil {
			return q.Bad("ifb", q.IFB, "%v", err)
		}
		if q.IFB == q.Interface {
			return q.Bad("ifb", q.IFB, "is the interface itself; the download is shaped on a separate IFB device that sqmkit creates (fix: remove option ifb, or name a device that does not exist yet, e.g. ifb4%s)", q.Interface)
		}
	}
	if err := q.checkAutorate(); err != nil {
		return err
	}
	for _, o := range []struct{ opt, v string }{{"iqdisc_opts", q.IQdiscOpts}, {"eqdisc_opts", q.EQdiscOpts}} {
		if len(o.v) > MaxOptsLen {
			return q.Bad(o.opt, o.v[:32]+"...", "%d bytes; an option string holds at most %d (a few tc keywords)", len(o.v), MaxOptsLen)
		}
	}
	return nil
}

// MaxOptsLen bounds iqdisc_opts and eqdisc_opts: a handful of tc keywords
// is what they are for.
const MaxOptsLen = 4096

// TrimRTT takes the rtt option as users write it, "50ms" or "rtt 50ms".
func TrimRTT(s string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "rtt "))
}

// isTCTime accepts a positive time with a unit, as tc reads it (5ms,
// 500us, 1.5s). A bare number would be microseconds to tc, which nobody
// writing "5" means.
func isTCTime(v string) bool {
	d, err := tcstats.ParseTime(v)
	return err == nil && d > 0 && strings.IndexFunc(v, unicode.IsLetter) > 0
}

// devName applies the kernel's rules for network device names, and
// refuses '#', which the kernel allows but tc's batch input cannot carry
// (it starts a comment).
func devName(n string) error {
	switch {
	case len(n) > 15:
		return fmt.Errorf("%q is longer than the 15 bytes Linux allows for a device name", n)
	case n == "." || n == ".." || strings.ContainsAny(n, "/: \t\n\r\v\f"):
		return fmt.Errorf("%q is not a valid Linux device name", n)
	case strings.ContainsRune(n, '#'):
		return fmt.Errorf("%q contains '#', which tc's batch input cannot carry (it starts a comment); rename the device", n)
	}
	return nil
}

// rttPresetNames lists the presets shortest first, as cake's manual does.
func rttPresetNames() []string {
	return slices.SortedFunc(maps.Keys(CakeRTTPresets), func(a, b string) int {
		return cmp.Compare(CakeRTTPresets[a], CakeRTTPresets[b])
	})
}

// AutorateBounds are autorate's floor and ceiling: as configured, or a
// fifth and twice the configured (base) rate. A fifth: below it a link is
// down more than slow, and the stall state covers that; twice: a base
// rate set for the evening can double at night.
func (q Queue) AutorateBounds() (lo, hi Rates) {
	lo, hi = q.AutorateMin, q.AutorateMax
	if lo.Download == 0 {
		lo.Download = max(MinRateKbit, q.Download/5)
	}
	if lo.Upload == 0 {
		lo.Upload = max(MinRateKbit, q.Upload/5)
	}
	if hi.Download == 0 {
		hi.Download = min(2*q.Download, MaxRateKbit)
	}
	if hi.Upload == 0 {
		hi.Upload = min(2*q.Upload, MaxRateKbit)
	}
	return lo, hi
}

// checkAutorate: the bounds must hold the base rate. Bounds of a queue
// without autorate are not used, so they never stop it being shaped (a
// tune --write may move the base past them).
func (q Queue) checkAutorate() error {
	if !q.Autorate {
		return nil
	}
	lo, hi := q.AutorateBounds()
	for _, d := range []struct {
		name         string
		base, lo, hi int
	}{{"download", q.Download, lo.Download, hi.Download}, {"upload", q.Upload, lo.Upload, hi.Upload}} {
		switch {
		case d.base == 0 && q.Autorate:
			return q.Bad(d.name, 0, "autorate follows both directions and needs both shaped; set %s (its base rate)", d.name)
		case d.base == 0:
		case d.lo > d.base:
			return q.Bad("autorate_min_"+d.name, d.lo, "%d kbit/s is above the %s rate %d it starts from; lower it", d.lo, d.name, d.base)
		case d.hi < d.base:
			return q.Bad("autorate_max_"+d.name, d.hi, "%d kbit/s is below the %s rate %d it starts from; raise it", d.hi, d.name, d.base)
		case d.hi > MaxRateKbit:
			return q.Bad("autorate_max_"+d.name, d.hi, "%d kbit/s is above %d kbit/s; rates are in kbit/s", d.hi, MaxRateKbit)
		}
	}
	return nil
}
