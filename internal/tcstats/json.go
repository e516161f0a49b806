package tcstats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// tc -j prints rates in bytes/s, times in µs and sizes in bytes as bare
// numbers; these tables restore the units the text output carries so both
// forms read the same through Rate, Duration and Size.
var (
	jsonRates = map[string]bool{"rate": true, "ceil": true, "peakrate": true, "bandwidth": true}
	jsonTimes = map[string]bool{"target": true, "interval": true, "lat": true, "ce_threshold": true, "rtt": true, "latency": true}
	jsonSizes = map[string]bool{"burst": true, "cburst": true, "mtu": true, "mpu": true, "memory_limit": true, "quantum": true}
)

// statKeys are the counters every tc -j object carries.
var statKeys = map[string]bool{
	"kind": true, "handle": true, "dev": true, "root": true, "parent": true,
	"options": true, "stab": true, "class": true, "bytes": true, "packets": true,
	"drops": true, "overlimits": true, "requeues": true, "backlog": true, "qlen": true,
}

func parseJSON(data []byte) ([]Record, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var objs []map[string]any
	if err := dec.Decode(&objs); err != nil {
		return nil, fmt.Errorf("tc JSON: %w (expected the output of `tc -j -s qdisc show`)", err)
	}
	recs := make([]Record, 0, len(objs))
	for _, o := range objs {
		recs = append(recs, jsonRecord(o))
	}
	if len(recs) == 0 {
		return nil, ErrEmpty
	}
	return recs, nil
}

func jsonRecord(o map[string]any) Record {
	r := Record{Type: "qdisc", Kind: str(o["kind"]), Handle: str(o["handle"]), Dev: str(o["dev"])}
	switch {
	case o["class"] != nil:
		r.Type, r.Kind = "class", str(o["class"])
	case o["pref"] != nil || o["protocol"] != nil:
		r.Type = "filter"
	}
	if b, _ := o["root"].(bool); b {
		r.Parent = "root"
	} else if p := str(o["parent"]); p != "" {
		r.Parent = parentName(p)
	}
	if _, ok := o["bytes"]; ok {
		r.HasStats = true
		r.Stats = Stats{
			Bytes: num(o["bytes"]), Packets: num(o["packets"]), Dropped: num(o["drops"]),
			Overlimits: num(o["overlimits"]), Requeues: num(o["requeues"]),
			BacklogBytes: num(o["backlog"]), BacklogPackets: num(o["qlen"]),
		}
	}
	for _, k := range []string{"protocol", "pref", "chain"} {
		if v, ok := o[k]; ok && r.Type == "filter" {
			r.Options = append(r.Options, Option{k, str(v)})
		}
	}
	if opts, ok := o["options"].(map[string]any); ok {
		if r.Type == "filter" {
			jsonFilter(&r, opts)
		} else {
			r.Options = append(r.Options, flatten("", opts)...)
		}
	}
	if stab, ok := o["stab"].(map[string]any); ok {
		r.Options = append(r.Options, flatten("stab_", stab)...)
	}
	var extra = map[string]any{}
	for k, v := range o {
		if !statKeys[k] && !(r.Type == "filter" && (k == "pref" || k == "protocol" || k == "chain")) {
			extra[k] = v
		}
	}
	if r.Type == "class" {
		r.Options = append(r.Options, flatten("", extra)...)
	} else {
		r.Counters = flatten("", extra)
	}
	return r
}

func jsonFilter(r *Record, opts map[string]any) {
	rest := map[string]any{}
	for k, v := range opts {
		switch k {
		case "fh":
			r.Handle = str(v)
		case "match":
			for _, m := range list(v) {
				if mm, ok := m.(map[string]any); ok {
					val, _ := strconv.ParseUint(str(mm["value"]), 16, 32)
					mask, _ := strconv.ParseUint(str(mm["mask"]), 16, 32)
					r.Matches = append(r.Matches, Match{Value: uint32(val), Mask: uint32(mask), Off: int(num(mm["off"]))})
				}
			}
		case "actions":
			for _, a := range list(v) {
				am, ok := a.(map[string]any)
				if !ok {
					continue
				}
				act := Action{Kind: str(am["kind"]), Redirect: str(am["to_dev"])}
				if st, ok := am["stats"].(map[string]any); ok {
					act.HasStats = true
					act.Stats = Stats{Bytes: num(st["bytes"]), Packets: num(st["packets"]), Dropped: num(st["drops"]), Overlimits: num(st["overlimits"])}
				}
				r.Actions = append(r.Actions, act)
			}
		default:
			rest[k] = v
		}
	}
	r.Options = append(r.Options, flatten("", rest)...)
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// flatten turns a JSON object into options, sorted by key so output is
// stable; nested objects become prefix_key.
func flatten(prefix string, m map[string]any) []Option {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var opts []Option
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]any:
			opts = append(opts, flatten(prefix+k+"_", v)...)
		case bool:
			if v {
				opts = append(opts, Option{Key: prefix + k})
			}
		case json.Number:
			opts = append(opts, Option{prefix + k, withUnit(k, v.String())})
		case []any:
			parts := make([]string, 0, len(v))
			for _, e := range v {
				parts = append(parts, str(e))
			}
			opts = append(opts, Option{prefix + k, strings.Join(parts, " ")})
		default:
			opts = append(opts, Option{prefix + k, str(v)})
		}
	}
	return opts
}

func withUnit(key, n string) string {
	f, err := strconv.ParseFloat(n, 64)
	switch {
	case err != nil:
		return n
	case jsonRates[key]:
		return strconv.FormatFloat(f*8, 'f', -1, 64) + "bit"
	case jsonTimes[key]:
		return n + "us"
	case jsonSizes[key]:
		return n + "b"
	}
	return n
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

func num(v any) uint64 {
	n, _ := strconv.ParseUint(str(v), 10, 64)
	return n
}
