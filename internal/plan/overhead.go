package plan

import (
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// Per-packet overhead components (bytes on the wire beyond the IP packet),
// spec §3. The totals are relative to the IP packet, which is what cake's
// overhead keyword and the MTU handed to nsstbl measure from.
const (
	ohEthernet = 18 // 14 header + 4 FCS
	ohNSS      = 4  // NSS internal framing
	ohPPPoE    = 10 // 8 PPPoE header + 2 PPP protocol id
	ohDSLite   = 40 // outer IPv6 header
	ohMAP      = 20 // MAP-E, as the field-tested NSS script counts it
	ohVLAN     = 4  // 802.1Q tag
	ohIPv4Tun  = 20 // outer IPv4 header of ipip/sit tunnels
)

// Overhead limits follow cake's accepted range.
const (
	minOverhead = -64
	maxOverhead = 256
)

// overhead returns the per-packet overhead for q on f and the note that
// explains it. A configured non-zero value always wins; otherwise it is
// detected from the UCI network proto/device or, on a box without UCI, from
// the kernel's device kind.
func overhead(q config.Queue, f linkinfo.Facts) (int, string) {
	if q.Overhead != 0 {
		return q.Overhead, fmt.Sprintf("overhead %d bytes (configured)", q.Overhead)
	}
	total := ohEthernet
	parts := []string{fmt.Sprintf("ethernet %d", ohEthernet)}
	add := func(name string, n int) {
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", name, n))
	}
	if q.Backend == config.NSS {
		add("nss", ohNSS)
	}

	proto, source := f.Proto, "proto"
	if proto == "" {
		proto, source = kindProto(f.Kind), "kind"
	}
	switch proto {
	case "pppoe":
		add("pppoe", ohPPPoE)
	case "dslite":
		add("dslite", ohDSLite)
	case "map":
		add("map", ohMAP)
	case "ipip":
		add("ipv4 tunnel", ohIPv4Tun)
	}

	dev := f.LowerDevice
	if dev == "" {
		dev = q.Interface
	}
	if strings.Contains(dev, ".") || f.Kind == "vlan" {
		add("vlan", ohVLAN)
	}

	var from string
	if source == "proto" {
		from = fmt.Sprintf("proto=%s device=%s", orDash(f.Proto), dev)
	} else {
		from = fmt.Sprintf("kind=%s device=%s", orDash(f.Kind), dev)
	}
	return total, fmt.Sprintf("%s -> overhead %d bytes (%s)", from, total, strings.Join(parts, " + "))
}

// kindProto maps the kernel's device kind onto the UCI proto whose
// encapsulation it implies, for hosts without /etc/config/network. A ppp
// device is assumed to be PPPoE: PPPoA links need linklayer atm and an
// explicit overhead anyway.
func kindProto(kind string) string {
	switch kind {
	case "ppp":
		return "pppoe"
	case "ip6tnl":
		return "dslite"
	case "ipip", "sit":
		return "ipip"
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
