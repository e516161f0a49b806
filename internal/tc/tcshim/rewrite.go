package main

import (
	"encoding/json"
	"strconv"
	"strings"
)

// kindAt returns the index of the qdisc kind in a `qdisc add|replace|change`
// argv, skipping the selectors and the stab size table before it.
func kindAt(argv []string) int {
	for i := 2; i < len(argv); i++ {
		switch argv[i] {
		case "dev", "parent", "handle":
			i++
		case "estimator":
			i += 2
		case "root":
		case "stab":
			for i+2 < len(argv) && strings.Contains(" mtu tsize mpu overhead linklayer ", " "+argv[i+1]+" ") {
				i += 2
			}
		default:
			return i
		}
	}
	return -1
}

// rewrite maps one tc command from NSS syntax onto stock qdiscs.
func rewrite(argv []string, fqPfifo bool) []string {
	if len(argv) < 2 {
		return argv
	}
	switch argv[0] {
	case "qdisc":
		if argv[1] != "add" && argv[1] != "replace" && argv[1] != "change" {
			return argv
		}
		k := kindAt(argv)
		if k < 0 {
			return argv
		}
		head, opts := argv[:k:k], argv[k+1:]
		switch kind := argv[k]; {
		case kind == "nsstbl":
			return append(head, tbf(opts)...)
		case kind == "nssfq_codel" && fqPfifo, kind == "fq_codel" && fqPfifo:
			return append(head, pfifo(opts)...)
		case kind == "nssfq_codel":
			return append(head, fqCodel(opts)...)
		}
	case "filter":
		for i := 0; i+1 < len(argv); i++ {
			if argv[i] == "action" && argv[i+1] == "nssmirred" {
				return append(argv[:i+1:i+1], mirred(argv[i+2:])...)
			}
		}
	}
	return argv
}

// pairs reads "key value" options; flags (no value) are listed in flags.
func pairs(opts []string, flags string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(opts); i++ {
		if strings.Contains(" "+flags+" ", " "+opts[i]+" ") || i+1 == len(opts) {
			m[opts[i]] = ""
			continue
		}
		m[opts[i]] = opts[i+1]
		i++
	}
	return m
}

// tbf stands in for nsstbl: a token bucket with one child qdisc at 1:,
// which is nsstbl's shape. Its own byte limit only matters until the
// child replaces its default queue.
func tbf(opts []string) []string {
	m := pairs(opts, "")
	out := []string{"tbf", "rate", m["rate"], "burst", m["burst"]}
	if v := m["mtu"]; v != "" {
		out = append(out, "mtu", v)
	}
	limit := 100000
	if b, err := strconv.Atoi(m["burst"]); err == nil && 4*b > limit {
		limit = 4 * b
	}
	return append(out, "limit", strconv.Itoa(limit))
}

const codelFlags = "ecn noecn set_default"

func fqCodel(opts []string) []string {
	m := pairs(opts, codelFlags)
	out := []string{"fq_codel"}
	for _, k := range []string{"limit", "target", "interval", "flows", "quantum"} {
		if v, ok := m[k]; ok {
			out = append(out, k, v)
		}
	}
	if _, ok := m["ecn"]; ok {
		out = append(out, "ecn")
	}
	return out
}

func pfifo(opts []string) []string {
	m := pairs(opts, codelFlags)
	if v, ok := m["limit"]; ok {
		return []string{"pfifo", "limit", v}
	}
	return []string{"pfifo"}
}

// mirred stands in for nssmirred: "redirect dev X fromdev Y" becomes an
// egress redirect to X (the fromdev is implied by the filter's device).
func mirred(opts []string) []string {
	m := pairs(opts, "redirect")
	return []string{"mirred", "egress", "redirect", "dev", m["dev"]}
}

// mapShow renames, in `tc [-s] [-j] qdisc show` output, each tbf to nsstbl
// and each qdisc under a tbf to nssfq_codel, printing them the way the NSS
// tc does (accel_mode 0). Other output passes through unchanged.
func mapShow(out string) string {
	if !strings.Contains(out, "tbf") {
		return out
	}
	lines := strings.SplitAfter(out, "\n")
	tbfs := map[string]bool{}
	inNSS := false
	var b strings.Builder
	for _, l := range lines {
		body := strings.TrimRight(l, "\n")
		nl := l[len(body):]
		switch {
		case strings.HasPrefix(body, "["):
			b.WriteString(mapJSON(body, tbfs) + nl)
		case strings.HasPrefix(body, "qdisc "):
			var mapped bool
			body, mapped = mapQdiscLine(body, tbfs)
			inNSS = mapped
			b.WriteString(body + nl)
		case inNSS && strings.Contains(body, "new_flows_len"):
			// fq_codel-only statistics; the NSS tc does not print them
		default:
			b.WriteString(l)
		}
	}
	return b.String()
}

// mapQdiscLine maps "qdisc KIND HANDLE (root|parent P) opts...".
func mapQdiscLine(line string, tbfs map[string]bool) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return line, false
	}
	kind, handle := f[1], f[2]
	pos := 3
	if f[3] == "dev" && len(f) > 5 {
		pos = 5
	}
	place := f[pos:]
	parent := ""
	if len(place) > 1 && place[0] == "parent" {
		parent = place[1]
	}
	keep := func(keys ...string) []string {
		m := pairs(place, "root "+codelFlags)
		var out []string
		for _, k := range keys {
			if v, ok := m[k]; ok {
				out = append(out, k, v)
			}
		}
		return out
	}
	head := strings.Join(f[3:pos], " ")
	if head != "" {
		head += " "
	}
	switch {
	case kind == "tbf":
		tbfs[handle] = true
		loc := "root"
		if parent != "" {
			loc = "parent " + parent
		}
		if len(place) > 2 && place[0] == "root" && place[1] == "refcnt" {
			loc += " refcnt " + place[2]
		}
		opts := keep("rate", "burst", "mtu")
		return "qdisc nsstbl " + handle + " " + head + loc + " " + strings.Join(append(opts, "accel_mode", "0"), " "), true
	case tbfs[parent] && (kind == "fq_codel" || kind == "pfifo"):
		opts := keep("target", "limit", "interval", "flows", "quantum")
		return "qdisc nssfq_codel " + handle + " " + head + "parent " + parent + " " + strings.Join(append(opts, "set_default", "accel_mode", "0"), " "), true
	}
	return line, false
}

func mapJSON(line string, tbfs map[string]bool) string {
	var qs []map[string]any
	if json.Unmarshal([]byte(line), &qs) != nil {
		return line
	}
	changed := false
	for _, q := range qs {
		kind, _ := q["kind"].(string)
		handle, _ := q["handle"].(string)
		parent, _ := q["parent"].(string)
		switch {
		case kind == "tbf":
			tbfs[handle] = true
			q["kind"], changed = "nsstbl", true
		case tbfs[parent] && (kind == "fq_codel" || kind == "pfifo"):
			q["kind"], changed = "nssfq_codel", true
		}
	}
	if !changed {
		return line
	}
	b, err := json.Marshal(qs)
	if err != nil {
		return line
	}
	return string(b)
}
