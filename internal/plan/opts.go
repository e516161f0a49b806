package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
)

// arg is one keyword of a leaf qdisc's argument list: a flag (val == "") or
// a key with one value. Arguments of the same group exclude each other
// (ecn/noecn, the cake diffserv modes, rtt and the rtt presets), so a user
// option replaces the computed argument of its group in place.
type arg struct {
	key, val string
	group    string
	tail     bool // stays last (nssfq_codel's set_default accel_mode 0)
}

// grammar says which keywords of one qdisc kind take a value and which
// flags exclude each other. Keywords it does not know are passed through.
type grammar struct {
	values map[string]string // key -> group
	flags  map[string]string // flag -> group
}

func set(group string, words ...string) map[string]string {
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = group
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func selfGroups(keys ...string) map[string]string {
	m := map[string]string{}
	for _, k := range keys {
		m[k] = k
	}
	return m
}

var (
	fqCodelGrammar = grammar{
		values: selfGroups("limit", "flows", "target", "interval", "quantum",
			"ce_threshold", "ce_threshold_selector", "memory_limit", "drop_batch"),
		flags: set("ecn", "ecn", "noecn"),
	}
	nssFQCodelGrammar = grammar{
		values: selfGroups("limit", "flows", "target", "interval", "quantum", "accel_mode"),
		flags:  merge(set("ecn", "ecn", "noecn"), set("set_default", "set_default")),
	}
	cakeGrammar = grammar{
		values: merge(selfGroups("overhead", "mpu", "memlimit", "fwmark"),
			set("bandwidth", "bandwidth"), set("rtt", "rtt")),
		flags: merge(
			set("bandwidth", "unlimited"),
			set("autorate-ingress", "autorate-ingress"),
			set("diffserv", config.CakeDiffservModes...),
			set("isolation", "flowblind", "srchost", "dsthost", "hosts", "flows",
				"dual-srchost", "dual-dsthost", "triple-isolate"),
			set("nat", "nat", "nonat"),
			set("wash", "wash", "nowash"),
			set("ingress", "ingress", "egress"),
			set("ack-filter", "ack-filter", "ack-filter-aggressive", "no-ack-filter"),
			set("split-gso", "split-gso", "no-split-gso"),
			set("atm", "atm", "noatm", "ptm"),
			set("rtt", cakeRTTPresetNames()...),
		),
	}
)

// parseOpts splits a user option string (iqdisc_opts/eqdisc_opts) by g;
// its errors say what is wrong, the caller names the option.
// Tokens must be plain words: the same line is printed for a shell and fed
// to `tc -batch`, so anything that would need quoting is refused.
func parseOpts(s string, g grammar) ([]arg, error) {
	toks := strings.Fields(s)
	var out []arg
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if err := plainWord(t); err != nil {
			return nil, err
		}
		if grp, ok := g.values[t]; ok {
			if i+1 == len(toks) {
				return nil, fmt.Errorf("%q needs a value (e.g. %q)", t, t+" "+example(t))
			}
			i++
			if err := plainWord(toks[i]); err != nil {
				return nil, err
			}
			out = append(out, arg{key: t, val: toks[i], group: grp})
			continue
		}
		// An unknown keyword gets no group: it is passed through as given,
		// after the computed arguments, so tc (parsing left to right) lets
		// it win.
		out = append(out, arg{key: t, group: g.flags[t]})
	}
	return out, nil
}

func example(key string) string {
	switch key {
	case "target", "interval", "rtt", "ce_threshold":
		return "5ms"
	}
	return "1024"
}

func plainWord(t string) error {
	for _, r := range t {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("._-:/@%+=,", r)
		if !ok {
			return fmt.Errorf("%q contains %q; use plain tc keywords and values", t, r)
		}
	}
	return nil
}

// override applies user arguments to computed ones: a user argument
// replaces the computed one of its group where it stands; new ones go
// before the tail; a repeated user key keeps its last value. No key is ever
// emitted twice.
func override(computed, user []arg) []arg {
	out := slices.Clone(computed)
	at := map[string]int{} // group -> index in out, or in added (negative, -1-i)
	for i, a := range out {
		if a.group != "" {
			at[a.group] = i
		}
	}
	var added []arg // new arguments, in the user's order
	for _, u := range user {
		i, ok := at[u.group]
		switch {
		case u.group != "" && ok && i >= 0:
			u.tail = out[i].tail
			out[i] = u
		case u.group != "" && ok:
			added[-1-i] = u
		default:
			if u.group != "" {
				at[u.group] = -1 - len(added)
			}
			added = append(added, u)
		}
	}
	pos := slices.IndexFunc(out, func(a arg) bool { return a.tail })
	if pos < 0 {
		pos = len(out)
	}
	return slices.Concat(out[:pos], added, out[pos:])
}

// lookup returns the value of key in args.
func lookup(args []arg, key string) (string, bool) {
	for _, a := range args {
		if a.key == key {
			return a.val, true
		}
	}
	return "", false
}

func has(args []arg, flag string) bool {
	_, ok := lookup(args, flag)
	return ok
}

func words(args []arg) []string {
	var w []string
	for _, a := range args {
		w = append(w, a.key)
		if a.val != "" {
			w = append(w, a.val)
		}
	}
	return w
}
