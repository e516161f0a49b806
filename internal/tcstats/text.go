package tcstats

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// ErrEmpty means the input held no qdisc, class or filter.
var ErrEmpty = errors.New("no qdisc, class or filter lines found (expected the output of `tc -s qdisc show`, `tc -s class show` or `tc -s filter show`)")

// Parse reads the output of `tc [-s] [-d] qdisc|class|filter show`, as text
// (stock or NSS-patched tc) or as JSON from `tc -j` (detected by a leading
// '['). Lines that belong to no record, such as a shell prompt pasted with
// the output, are skipped.
func Parse(data []byte) ([]Record, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		return parseJSON(t)
	}
	return parseText(string(data))
}

// textParser carries the state of one record across its lines.
type textParser struct {
	recs      []Record
	cur       *Record
	afterSent bool    // the Sent line was seen: following pairs are counters
	action    *Action // filters: the action the next lines belong to
	actStats  bool    // "Action statistics:" seen: the next Sent is the action's
}

func parseText(s string) ([]Record, error) {
	var p textParser
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, " \t\r")
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			continue
		case strings.HasPrefix(line, "qdisc ") || strings.HasPrefix(line, "class ") || strings.HasPrefix(line, "filter "):
			p.start(line)
		case isPrompt(trim):
			p.end()
		case p.cur != nil:
			p.cur.Lines = append(p.cur.Lines, line)
			p.continuation(trim)
		}
	}
	p.end()
	if len(p.recs) == 0 {
		return nil, ErrEmpty
	}
	return p.recs, nil
}

// isPrompt spots a pasted shell prompt such as "root@OpenWrt:~# tc -s qdisc".
func isPrompt(s string) bool {
	i := strings.Index(s, "tc ")
	return i > 0 && strings.ContainsAny(s[:i], "#$>")
}

func (p *textParser) end() {
	if p.cur != nil {
		p.recs = append(p.recs, *p.cur)
	}
	p.cur, p.afterSent, p.action, p.actStats = nil, false, nil, false
}

func (p *textParser) start(line string) {
	p.end()
	toks := strings.Fields(line)
	r := &Record{Type: toks[0], Lines: []string{line}}
	p.cur = r
	if r.Type == "filter" {
		r.Options = parseFilterHeader(r, toks[1:])
		return
	}
	if len(toks) > 1 {
		r.Kind = toks[1]
	}
	if len(toks) > 2 {
		r.Handle = toks[2]
	}
	i := 3
loop:
	for i < len(toks) {
		switch toks[i] {
		case "root":
			r.Parent = "root"
			i++
		case "dev", "parent":
			if i+1 >= len(toks) {
				break loop
			}
			if toks[i] == "dev" {
				r.Dev = toks[i+1]
			} else {
				r.Parent = parentName(toks[i+1])
			}
			i += 2
		default:
			break loop
		}
	}
	r.Options = parseOptions(toks[min(i, len(toks)):], "")
}

func parseFilterHeader(r *Record, toks []string) []Option {
	var rest []string
	var opts []Option
	for i := 0; i < len(toks); i++ {
		t := strings.TrimPrefix(toks[i], "*")
		has := i+1 < len(toks)
		switch {
		case t == "dev" && has:
			r.Dev = toks[i+1]
			i++
		case t == "parent" && has:
			r.Parent = parentName(toks[i+1])
			i++
		case (t == "protocol" || t == "pref" || t == "prio") && has:
			opts = append(opts, Option{t, toks[i+1]})
			i++
			if t != "protocol" && r.Kind == "" && i+1 < len(toks) {
				r.Kind = toks[i+1]
				i++
			}
		case t == "fh" && has:
			r.Handle = toks[i+1]
			i++
		default:
			rest = append(rest, t)
		}
	}
	return append(opts, parseOptions(rest, "")...)
}

func (p *textParser) continuation(trim string) {
	r := p.cur
	toks := strings.Fields(strings.NewReplacer("(", " ", ")", " ", ",", " ").Replace(trim))
	if len(toks) == 0 {
		return
	}
	if r.Type == "filter" {
		p.filterLine(trim, toks)
		return
	}
	switch {
	case toks[0] == "Sent":
		parseSent(toks, &r.Stats)
		r.HasStats, p.afterSent = true, true
	case strings.HasPrefix(trim, "("):
		// flow classes of fq_codel print drops without a Sent line
		parseSent(toks, &r.Stats)
		p.afterSent = true
	case p.afterSent:
		r.Counters = append(r.Counters, parseCounters(toks, &r.Stats)...)
	case toks[0] == "linklayer":
		r.Options = append(r.Options, parseOptions(toks, "stab_")...)
	default:
		r.Options = append(r.Options, parseOptions(toks, "")...)
	}
}

func (p *textParser) filterLine(trim string, toks []string) {
	r := p.cur
	switch {
	case toks[0] == "match" && len(toks) >= 4 && toks[2] == "at":
		if m, ok := parseMatch(toks[1], toks[3]); ok {
			r.Matches = append(r.Matches, m)
		}
	case toks[0] == "action" && len(toks) >= 4 && toks[1] == "order":
		p.addAction(toks[3], trim)
	case toks[0] == "police":
		// u32's legacy "police" prints its counters right after, without
		// an "Action statistics:" header
		p.addAction("police", trim)
		p.actStats = true
	case trim == "Action statistics:":
		p.actStats = true
	case toks[0] == "Sent":
		if p.actStats && p.action != nil {
			parseSent(toks, &p.action.Stats)
			p.action.HasStats = true
			p.actStats = false
			return
		}
		parseSent(toks, &r.Stats)
		r.HasStats = true
	case toks[0] == "backlog":
		// backlog of an action or filter: never used for judging
	case p.action == nil:
		r.Options = append(r.Options, parseOptions(toks, "")...)
	}
}

func (p *textParser) addAction(kind, line string) {
	r := p.cur
	r.Actions = append(r.Actions, Action{Kind: kind, Line: line, Redirect: redirectTarget(line)})
	p.action = &r.Actions[len(r.Actions)-1]
	p.actStats = false
}

// redirectTarget finds the device of "(Egress Redirect to device ifb4wan)"
// or "redirect dev ifb@wan". A device name may hold parentheses itself (no
// whitespace): the descriptor ends at the line's last ')'
// (TestRedirectTargetWithParenthesis).
func redirectTarget(line string) string {
	const mirred = "Redirect to device "
	if i := strings.Index(line, mirred); i >= 0 {
		rest := line[i+len(mirred):]
		if j := strings.LastIndex(rest, ")"); j > 0 && !strings.ContainsAny(rest[:j], " \t") {
			return rest[:j]
		}
		if f := strings.Fields(rest); len(f) > 0 {
			return f[0]
		}
		return ""
	}
	toks := strings.Fields(line)
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] == "device" || toks[i] == "dev" {
			return toks[i+1]
		}
	}
	return ""
}

func parseMatch(vm, off string) (Match, bool) {
	v, m, ok := strings.Cut(vm, "/")
	if !ok {
		return Match{}, false
	}
	val, err1 := strconv.ParseUint(v, 16, 32)
	mask, err2 := strconv.ParseUint(m, 16, 32)
	o, err3 := strconv.Atoi(off)
	if err1 != nil || err2 != nil || err3 != nil {
		return Match{}, false
	}
	return Match{Value: uint32(val), Mask: uint32(mask), Off: o}, true
}

// parseSent reads "Sent 1 bytes 2 pkt dropped 3 overlimits 4 requeues 5"
// (parentheses and commas already removed).
func parseSent(toks []string, s *Stats) {
	for i := 0; i+1 < len(toks); i++ {
		a, b := toks[i], toks[i+1]
		if n, err := strconv.ParseUint(a, 10, 64); err == nil {
			switch b {
			case "bytes":
				s.Bytes = n
			case "pkt", "pkts":
				s.Packets = n
			}
			continue
		}
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil {
			continue
		}
		switch a {
		case "dropped":
			s.Dropped = n
		case "overlimits":
			s.Overlimits = n
		case "requeues":
			s.Requeues = n
		}
	}
}

// parseCounters reads a statistics line: backlog and requeues go to s, the
// rest become pairs ("lended: 1" → lended=1).
func parseCounters(toks []string, s *Stats) []Option {
	var rest []string
	for i := 0; i < len(toks); i++ {
		switch {
		case toks[i] == "backlog" && i+2 < len(toks):
			if b, err := ParseSize(toks[i+1]); err == nil {
				s.BacklogBytes = b
			}
			if n, err := ParsePackets(toks[i+2]); err == nil {
				s.BacklogPackets = n
			}
			i += 2
		case toks[i] == "requeues" && i+1 < len(toks):
			if n, err := strconv.ParseUint(toks[i+1], 10, 64); err == nil && n > s.Requeues {
				s.Requeues = n
			}
			i++
		default:
			rest = append(rest, strings.TrimSuffix(toks[i], ":"))
		}
	}
	return parseOptions(rest, "")
}

// valueKeys take the next token as their value even when it is not a number.
var valueKeys = map[string]bool{
	"bandwidth": true, "linklayer": true, "action": true, "protocol": true,
	"rtt": true, "leaf": true, "handle": true, "default": true, "parent": true,
	"flowid": true, "classid": true, "dev": true, "ht": true,
}

// parseOptions turns tokens into pairs and flags: a token followed by a
// number (or any token after a valueKeys key) is a pair, other tokens are
// flags, and numbers without a key extend the previous value (priomap).
func parseOptions(toks []string, prefix string) []Option {
	var opts []Option
	for i := 0; i < len(toks); i++ {
		// iproute2 prints "*flowid" for a u32 key whose selector is not
		// terminal; the target class is the same, so the key must be too.
		t := strings.TrimPrefix(toks[i], "*")
		if strings.Trim(t, "-") == "" {
			continue // the ingress qdisc's "----------------"
		}
		if isNumeric(t) {
			if n := len(opts); n > 0 && opts[n-1].Value != "" {
				opts[n-1].Value += " " + t
			} else {
				opts = append(opts, Option{Key: prefix + t})
			}
			continue
		}
		if i+1 < len(toks) && takesValue(t, toks[i+1]) {
			opts = append(opts, Option{prefix + t, toks[i+1]})
			i++
			continue
		}
		opts = append(opts, Option{Key: prefix + t})
	}
	return opts
}

func takesValue(key, v string) bool {
	if isNumeric(v) {
		return true
	}
	if !valueKeys[key] {
		return false
	}
	if key == "flowid" || key == "classid" || key == "leaf" {
		return strings.Contains(v, ":")
	}
	return true
}

func isNumeric(t string) bool {
	if t == "" {
		return false
	}
	if t[0] == '-' && len(t) > 1 {
		t = t[1:]
	}
	return t[0] >= '0' && t[0] <= '9' || t[0] == '.' && len(t) > 1 && t[1] >= '0' && t[1] <= '9'
}
