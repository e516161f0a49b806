package tc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Qdisc is one qdisc as `tc -j -s qdisc show` reports it.
type Qdisc struct {
	Dev     string `json:"-"`
	Kind    string `json:"kind"`
	Handle  string `json:"handle"`
	Parent  string `json:"parent"` // "" for the root qdisc
	Root    bool   `json:"root"`
	Bytes   uint64 `json:"bytes"`
	Packets uint64 `json:"packets"`
	Drops   uint64 `json:"drops"`
}

// Default reports a qdisc the kernel attached by itself (handle 0:), which a
// teardown leaves in place.
func (q Qdisc) Default() bool { return q.Handle == "0:" || q.Handle == "" }

// Class is one class as `tc class show` reports it.
type Class struct {
	Dev    string
	Kind   string
	Handle string // classid, e.g. "1:1"
	Parent string // "root" when attached directly to its qdisc
}

// Filter is one filter (its hash-table entries merged) on a parent.
type Filter struct {
	Dev     string
	Parent  string
	Kind    string
	Pref    int
	Actions []string // action kinds, e.g. "mirred"
	Target  string   // the device a redirect action points at
}

// State is what the kernel holds for a set of devices.
type State struct {
	Qdiscs  []Qdisc
	Classes []Class
	Filters []Filter
}

// Show reads the qdiscs, classes and ingress filters of devs: one JSON batch
// for qdiscs and filters, plus one text `class show` per device with a
// classful qdisc (iproute2 6.1 ignores -j for classes). Every dev must exist.
func (r *Runner) Show(devs ...string) (*State, error) {
	var lines [][]string
	for _, d := range devs {
		lines = append(lines, []string{"qdisc", "show", "dev", d}, []string{"filter", "show", "dev", d, "parent", "ffff:"})
	}
	out, _, err := r.run("tc", []string{"-j", "-s", "-force"}, lines)
	if err != nil && !isOnlyMissingParent(err) {
		return nil, err
	}
	st := &State{}
	if err := decodeShow(out, devs, st); err != nil {
		return nil, err
	}
	for _, d := range devs {
		if !hasClasses(st.Qdiscs, d) {
			continue
		}
		out, _, err = r.run("tc", nil, [][]string{{"class", "show", "dev", d}})
		if err != nil {
			return nil, err
		}
		st.Classes = append(st.Classes, parseClasses(string(out), d)...)
	}
	return st, nil
}

// isOnlyMissingParent accepts a batch whose only refusals are filter shows
// on a device without an ingress qdisc.
func isOnlyMissingParent(err error) bool {
	be, ok := err.(*BatchError)
	if !ok {
		return false
	}
	for _, f := range be.Failures {
		if f.Line == 0 || be.Lines[f.Line-1][0] != "filter" {
			return false
		}
	}
	return true
}

// decodeShow reads the JSON arrays printed for a Show batch: per dev one
// qdisc array, then one filter array (absent when the filter show failed,
// which only happens after the qdisc array of the same dev).
func decodeShow(out []byte, devs []string, st *State) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	var pending []json.RawMessage
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("tc -j output: %w", err)
		}
		pending = append(pending, raw)
	}
	di := -1
	for _, raw := range pending {
		var items []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("tc -j output: %w", err)
		}
		// A qdisc array always holds at least the root qdisc and its items
		// carry "handle"; filter arrays carry "protocol" or are empty.
		isQdisc := len(items) > 0 && items[0]["handle"] != nil
		if isQdisc {
			di++
			if di >= len(devs) {
				return fmt.Errorf("tc -j output: more qdisc lists than devices")
			}
			var qs []Qdisc
			if err := json.Unmarshal(raw, &qs); err != nil {
				return fmt.Errorf("tc -j qdisc output: %w", err)
			}
			for i := range qs {
				qs[i].Dev = devs[di]
			}
			st.Qdiscs = append(st.Qdiscs, qs...)
			continue
		}
		if di < 0 {
			return fmt.Errorf("tc -j output: filter list before any qdisc list")
		}
		st.Filters = append(st.Filters, decodeFilters(raw, devs[di])...)
	}
	return nil
}

func decodeFilters(raw json.RawMessage, dev string) []Filter {
	var fs []struct {
		Kind    string `json:"kind"`
		Pref    int    `json:"pref"`
		Options struct {
			Actions []struct {
				Kind  string `json:"kind"`
				ToDev string `json:"to_dev"`
			} `json:"actions"`
		} `json:"options"`
	}
	if json.Unmarshal(raw, &fs) != nil {
		return nil
	}
	var out []Filter
	for _, f := range fs {
		// u32 lists its hash table and each key as separate entries of the
		// same pref; merge them into one filter.
		var cur *Filter
		for i := range out {
			if out[i].Pref == f.Pref && out[i].Kind == f.Kind {
				cur = &out[i]
			}
		}
		if cur == nil {
			out = append(out, Filter{Dev: dev, Parent: "ffff:", Kind: f.Kind, Pref: f.Pref})
			cur = &out[len(out)-1]
		}
		for _, a := range f.Options.Actions {
			cur.Actions = append(cur.Actions, a.Kind)
			if a.ToDev != "" {
				cur.Target = a.ToDev
			}
		}
	}
	return out
}

// hasClasses reports whether dev has a classful qdisc; only those cost a
// class show.
func hasClasses(qs []Qdisc, dev string) bool {
	for _, q := range qs {
		if q.Dev == dev && (q.Kind == "htb" || q.Kind == "hfsc" || q.Kind == "prio" || q.Kind == "drr") {
			return true
		}
	}
	return false
}

// parseClasses reads `tc class show` text: "class KIND ID (root|parent P) ...".
func parseClasses(out, dev string) []Class {
	var cs []Class
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "class" {
			continue
		}
		c := Class{Dev: dev, Kind: f[1], Handle: f[2], Parent: "root"}
		if f[3] == "parent" && len(f) > 4 {
			c.Parent = f[4]
		}
		cs = append(cs, c)
	}
	return cs
}
