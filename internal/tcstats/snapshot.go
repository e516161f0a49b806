package tcstats

import (
	"fmt"
	"slices"
)

// Snapshot is sqmkit's one model of the kernel's shaping state: the qdiscs,
// classes and filters of a set of devices, each record with its Dev set.
// A live read (tc.Runner.Read) and pasted output (doctor --tc-stats) both
// produce it; status, doctor, apply and rate changes all read it.
type Snapshot struct {
	Records []Record
	// Complete means the qdisc records cover every device (`tc qdisc show`
	// without dev), so a device without records holds nothing at all.
	Complete bool
	// NoFilters means filters were not read (pasted output without
	// --tc-filter): an ingress qdisc's redirect is then unknown, not absent.
	NoFilters bool
	// NoClasses means classes were not read (pasted output without
	// --tc-class): a planned class is then unknown, not missing.
	NoClasses bool
}

// Ingress is the Parent of everything on a device's ingress hook: the
// ingress or clsact qdisc (tc prints parent ffff:fff1) and the filters
// attached to it (tc's `parent ffff:`).
const Ingress = "ingress"

// parentName maps the ingress/clsact hook to Ingress.
func parentName(p string) string {
	if p == "ffff:fff1" || p == "ffff:fff2" || p == "ffff:" {
		return Ingress
	}
	return p
}

// defaultKinds are what the kernel attaches when nobody configured a root.
var defaultKinds = map[string]bool{"noqueue": true, "pfifo_fast": true, "mq": true}

// IsDefault reports a root qdisc the kernel attached by itself, which a
// teardown leaves in place.
func (r *Record) IsDefault() bool {
	return r.Type == "qdisc" && (r.Handle == "0:" || r.Handle == "" || defaultKinds[r.Kind] && r.Parent == "root")
}

// classful are the qdisc kinds whose classes and filters carry meaning, so
// reading a device's classes and root filters is worth a process. tbf and
// nsstbl print a pseudo class without counters; flow queues print one class
// per active flow; neither says anything a qdisc line does not.
var classful = map[string]bool{
	"htb": true, "hfsc": true, "prio": true, "drr": true, "qfq": true, "ets": true, "cbq": true,
	"multiq": true, "nssprio": true, "nsswrr": true, "nsswfq": true, "nsshtb": true,
}

// IsCake reports cake and its multi-queue variant, whose root carries the
// configuration (bandwidth, overhead, rtt) of every instance under it.
func IsCake(kind string) bool { return kind == "cake" || kind == "cake_mq" }

// Classful reports a qdisc kind whose classes are configuration.
func Classful(kind string) bool { return classful[kind] }

// Of returns the records of dev, in tc's order.
func (s *Snapshot) Of(dev string) []*Record {
	var out []*Record
	for i := range s.Records {
		if s.Records[i].Dev == dev {
			out = append(out, &s.Records[i])
		}
	}
	return out
}

// Has reports whether tc printed anything for dev.
func (s *Snapshot) Has(dev string) bool {
	return slices.ContainsFunc(s.Records, func(r Record) bool { return r.Dev == dev })
}

// Find returns the record of dev with type typ and handle h, nil when none.
func (s *Snapshot) Find(dev, typ, h string) *Record {
	for _, r := range s.Of(dev) {
		if r.Type == typ && r.Handle == h {
			return r
		}
	}
	return nil
}

// Root returns dev's root qdisc (a kernel default included), nil when tc
// printed none.
func (s *Snapshot) Root(dev string) *Record {
	for _, r := range s.Of(dev) {
		if r.Type == "qdisc" && r.Parent == "root" {
			return r
		}
	}
	return nil
}

// Shaped reports a root qdisc on dev that somebody configured.
func (s *Snapshot) Shaped(dev string) bool {
	r := s.Root(dev)
	return r != nil && !r.IsDefault()
}

// IngressQdisc returns dev's ingress (or clsact) qdisc, nil when none.
func (s *Snapshot) IngressQdisc(dev string) *Record {
	for _, r := range s.Of(dev) {
		if r.Type == "qdisc" && (r.Parent == Ingress || r.Handle == "ffff:" && (r.Kind == "ingress" || r.Kind == "clsact")) {
			return r
		}
	}
	return nil
}

// Redirects lists the devices dev's ingress filters redirect to.
func (s *Snapshot) Redirects(dev string) []string {
	var out []string
	for _, r := range s.Of(dev) {
		if r.Type != "filter" || r.Parent != Ingress {
			continue
		}
		for _, a := range r.Actions {
			if a.Redirect != "" && !slices.Contains(out, a.Redirect) {
				out = append(out, a.Redirect)
			}
		}
	}
	return out
}

// HasClassful reports a classful qdisc on dev: only then are its classes
// and root filters worth reading.
func (s *Snapshot) HasClassful(dev string) bool {
	for _, r := range s.Of(dev) {
		if r.Type == "qdisc" && Classful(r.Kind) {
			return true
		}
	}
	return false
}

// Configured lists the devices with a configured root or an ingress qdisc,
// in tc's order: what a reader inspects when nobody names a device.
func (s *Snapshot) Configured() []string {
	var out []string
	for _, r := range s.Records {
		if r.Type == "qdisc" && !slices.Contains(out, r.Dev) && (r.Parent == "root" && !r.IsDefault() || r.Parent == Ingress) {
			out = append(out, r.Dev)
		}
	}
	return out
}

// FormatRate prints bit/s the way people read shaper rates.
func FormatRate(bits uint64) string {
	switch {
	case bits == 0:
		return "an unknown rate"
	case bits >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", float64(bits)/1e9)
	case bits >= 1e6:
		return fmt.Sprintf("%.4g Mbit/s", float64(bits)/1e6)
	}
	return fmt.Sprintf("%.4g kbit/s", float64(bits)/1e3)
}
