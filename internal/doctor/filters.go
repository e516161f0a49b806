package doctor

import (
	"fmt"
	"slices"

	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// rule reports a filter that does something: the hash-table headers u32
// prints around each rule do not.
func rule(f *tcstats.Record) bool {
	return len(f.Matches) > 0 || len(f.Actions) > 0 || f.Has("flowid") || f.Has("classid")
}

func target(f *tcstats.Record) string {
	if v, ok := f.Get("flowid"); ok {
		return v
	}
	v, _ := f.Get("classid")
	return v
}

// matchByte reports a u32 selector on the byte at off with value v.
func matchByte(f *tcstats.Record, off int, v uint8) bool {
	word, shift := off&^3, uint(24-8*(off&3))
	for _, m := range f.Matches {
		if m.Off == word && m.Mask>>shift&0xff == 0xff && uint8(m.Value>>shift) == v {
			return true
		}
	}
	return false
}

// icmp: IPv4 protocol 1 (byte 9) or IPv6 next header 58 (byte 6).
func icmp(f *tcstats.Record) bool {
	return matchByte(f, 9, 1) || f.Protocol() == "ipv6" && matchByte(f, 6, 58)
}

// ackPriority recognises the wondershaper rule: TCP (protocol byte 6) with
// the ACK flag (byte 33, 0x10) or a total length below 64 bytes.
func ackPriority(f *tcstats.Record) bool {
	if !matchByte(f, 9, 6) {
		return false
	}
	for _, m := range f.Matches {
		ack := m.Off == 32 && m.Mask&0x00ff0000 != 0 && m.Value&0x00100000 != 0
		short := m.Off == 0 && m.Mask&0xffc0 == 0xffc0 && m.Value&0xffc0 == 0
		if ack || short {
			return true
		}
	}
	return false
}

func filterName(dev string, f *tcstats.Record) string {
	pref, _ := f.Get("pref")
	s := fmt.Sprintf("%s filter parent %s protocol %s pref %s %s", dev, f.Parent, f.Protocol(), pref, f.Kind)
	if f.Handle != "" {
		s += " fh " + f.Handle
	}
	return s
}

// filters flags the wondershaper-era classification rules on the WAN device.
func (c *checker) filters(wan string) {
	t := c.tree(wan)
	protos := map[string][]string{} // parent → protocols of its rules
	var v4 []*tcstats.Record
	for _, f := range t.filters {
		if !rule(f) {
			continue
		}
		name := filterName(wan, f)
		protos[f.Parent] = append(protos[f.Parent], f.Protocol())
		if f.Protocol() == "ip" {
			v4 = append(v4, f)
		}
		for _, a := range f.Actions {
			if a.Kind == "police" {
				// an action counts every packet it sees, dropped ones included
				c.add(Warn, "ingress-policer", name,
					"Shape the download on an IFB (ingress redirect + fq_codel or cake) instead of policing: a policer drops bursts and halves TCP throughput.",
					a.Line, fmt.Sprintf("policer dropped %d of %d pkt", a.Stats.Dropped, a.Stats.Packets))
			}
		}
		if to := target(f); to != "" && icmp(f) {
			c.add(Warn, "icmp-priority", name,
				"Remove the ICMP rule: prioritised pings flood the priority class and make latency tests lie about bulk traffic.",
				fmt.Sprintf("ICMP matched into class %s", to), ruleText(f))
		}
		if to := target(f); to != "" && ackPriority(f) {
			c.add(Warn, "ack-priority", name,
				"Remove the ACK rule and let fq_codel or cake give sparse flows their head start.",
				fmt.Sprintf("TCP ACKs matched into class %s", to), ruleText(f))
		}
	}
	byParent := map[string][]string{}
	var parents []string
	for _, f := range v4 {
		if slices.Contains(protos[f.Parent], "all") || slices.Contains(protos[f.Parent], "ipv6") {
			continue
		}
		if byParent[f.Parent] == nil {
			parents = append(parents, f.Parent)
		}
		byParent[f.Parent] = append(byParent[f.Parent], ruleText(f))
	}
	for _, p := range parents {
		c.add(Warn, "ipv4-only-filter", fmt.Sprintf("%s filters on parent %s", wan, p),
			"Use `protocol all` (or add the same rules for ipv6): IPv6 traffic skips these rules.",
			append([]string{fmt.Sprintf("%d rules match protocol ip only; none for ipv6 or all on parent %s", len(byParent[p]), p)}, byParent[p]...)...)
	}
}
