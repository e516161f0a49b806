// Package tcstats parses what `tc -s` prints about qdiscs, classes and
// filters — stock iproute2 text, NSS-patched tc text, and `tc -j` JSON —
// into generic records. Kinds are never validated: an unknown qdisc parses
// into kind, handle, parent, counters and its `key value` pairs, so output
// pasted from any router can be judged.
package tcstats

import (
	"strings"
)

// Stats are the counters tc prints under every qdisc and class.
type Stats struct {
	Bytes, Packets                uint64
	Dropped, Overlimits, Requeues uint64
	BacklogBytes, BacklogPackets  uint64
}

// Option is one `key value` pair, or a flag when Value is "".
type Option struct{ Key, Value string }

// Match is one u32 selector as tc prints it: `match VALUE/MASK at OFF`.
type Match struct {
	Value, Mask uint32
	Off         int
}

// Action is one filter action (mirred, nssmirred, police, ...).
type Action struct {
	Kind     string
	Redirect string // target device of a mirred-like redirect
	Line     string // the line that named the action
	Stats    Stats
	HasStats bool
}

// Record is one qdisc, class or filter.
type Record struct {
	Type   string // "qdisc", "class" or "filter"
	Kind   string // "htb", "nssfq_codel", "u32", ...
	Handle string // "1:", "1:1"; a filter's fh
	// Parent is "root" for a device's root qdisc or a root class, Ingress
	// for the ingress hook's qdisc (ffff:fff1) and filters (ffff:), else a
	// handle.
	Parent string
	Dev    string // "" when tc did not print it (show dev X)

	Stats    Stats
	HasStats bool // false when tc printed no Sent line (e.g. class tbf 20:1)

	// Options are the configuration pairs and flags of the header and its
	// continuation lines; a stab line's keys carry the prefix "stab_".
	Options []Option
	// Counters are the extra statistics after the Sent line
	// (maxpacket, drop_overlimit, ecn_mark, lended, tokens, ...).
	Counters []Option

	Matches []Match  // filters: u32 selectors
	Actions []Action // filters

	Lines []string // the lines tc printed for this record, for evidence
}

// Get returns the first value of key among the options.
func (r *Record) Get(key string) (string, bool) { return lookup(r.Options, key) }

// Counter returns the first value of key among the counters.
func (r *Record) Counter(key string) (string, bool) { return lookup(r.Counters, key) }

// Has reports whether key appears among the options, as flag or pair.
func (r *Record) Has(key string) bool {
	_, ok := r.Get(key)
	return ok
}

// Rate returns option key as bit/s.
func (r *Record) Rate(key string) (uint64, bool) { return value(r, key, ParseRate) }

// Size returns option key as bytes.
func (r *Record) Size(key string) (uint64, bool) { return value(r, key, ParseSize) }

// Packets returns option key as a packet count.
func (r *Record) Packets(key string) (uint64, bool) { return value(r, key, ParsePackets) }

// CounterValue returns counter key as a number.
func (r *Record) CounterValue(key string) (uint64, bool) {
	v, ok := r.Counter(key)
	if !ok {
		return 0, false
	}
	n, err := ParsePackets(v)
	return n, err == nil
}

// Protocol is a filter's `protocol` (ip, ipv6, all, 802.1Q, ...).
func (r *Record) Protocol() string {
	v, _ := r.Get("protocol")
	return v
}

// ID names the record the way tc does: "qdisc htb 1:", "class htb 1:1".
func (r *Record) ID() string {
	s := r.Type + " " + r.Kind
	if r.Handle != "" {
		s += " " + r.Handle
	}
	return s
}

func lookup(opts []Option, key string) (string, bool) {
	for _, o := range opts {
		if o.Key == key {
			return o.Value, true
		}
	}
	return "", false
}

func value[T any](r *Record, key string, parse func(string) (T, error)) (T, bool) {
	var zero T
	s, ok := r.Get(key)
	if !ok || s == "" {
		return zero, false
	}
	v, err := parse(s)
	if err != nil {
		return zero, false
	}
	return v, true
}

// Major returns the major part of a handle with its colon: "10:3" → "10:".
func Major(h string) string {
	if i := strings.IndexByte(h, ':'); i >= 0 {
		return h[:i+1]
	}
	return h
}
