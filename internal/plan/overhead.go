package plan

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// Per-packet overhead components (bytes on the wire beyond the IP packet),
// docs/design.md, "Per-packet overhead". The totals are relative to the IP packet, which is what cake's
// overhead keyword and the MTU handed to nsstbl measure from.
const (
	ohEthernet = 18 // 14 header + 4 FCS
	ohNSS      = 4  // NSS internal framing
	ohPPPoE    = 10 // 8 PPPoE header + 2 PPP protocol id
	ohDSLite   = 40 // outer IPv6 header
	ohMAP      = 20 // MAP-E, as the field-tested NSS script counts it
	ohVLAN     = 4  // 802.1Q tag
	ohIPv4Tun  = 20 // outer IPv4 header (proto ipip: linkinfo's name for ipip/sit devices)
)

// overhead returns the per-packet overhead for q on f and the note that
// explains it. A configured non-zero value always wins; otherwise it is
// detected from the network proto and the (lower) device name, plus the
// VLAN tag when the kernel says the device is a VLAN.
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

	switch f.Proto { // linkinfo.Read derives it from the device kind when there is no UCI
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

	from := fmt.Sprintf("proto=%s device=%s", cmp.Or(f.Proto, "-"), dev)
	return total, fmt.Sprintf("%s -> overhead %d bytes (%s)", from, total, strings.Join(parts, " + "))
}
