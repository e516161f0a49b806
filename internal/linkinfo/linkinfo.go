// Package linkinfo gathers the facts about a WAN device that planning needs
// (MTU, encapsulation, link speed), reading only files under a root
// directory so a router's /etc and /sys can be examined on any machine.
package linkinfo

// Facts describes one device as seen through the root directory.
type Facts struct {
	Device string // the device named in the queue section
	Exists bool   // /sys/class/net/<dev> is present
	OperUp bool   // operstate is "up" or "unknown"

	MTU int // from /sys/class/net/<dev>/mtu; 1500 (noted) when absent
	// TXQueues and RXQueues count /sys/class/net/<dev>/queues/tx-* and
	// rx-*: 0 when the directory says nothing.
	TXQueues, RXQueues int
	SpeedMbit          int // from /sys/class/net/<dev>/speed; 0 when unknown

	// Kind is the kernel's view: "ether", "vlan", "ppp", "ip6tnl", "ipip",
	// "wireguard", "ifb", ... ("" when /sys says nothing).
	Kind string
	// Lower are the devices the kernel puts this one on: a VLAN's
	// (/proc/net/vlan) and /sys/class/net/<dev>/lower_* links.
	Lower []string

	// From /etc/config/network when a section matches the device.
	NetworkSection string // e.g. "wan"
	Proto          string // e.g. "pppoe", "dslite", "map", "dhcp", "static", "wireguard"
	LowerDevice    string // network.<sec>.device (or ifname), e.g. "wan.7"

	// Notes record how each fact was found, one line each, for `sqmkit plan`.
	Notes []string
}
