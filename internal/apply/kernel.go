package apply

import (
	"encoding/binary"
	"net"
	"strings"
	"syscall"

	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// Kernel is what apply needs of the running system. System is the real one;
// tcfake.Kernel simulates it for tests that inject a fault at every line.
type Kernel interface {
	// Batch feeds lines to `prog [-force] -batch -` (see tc.Runner.Batch).
	Batch(prog string, force bool, lines [][]string) (warnings []string, err error)
	// Read returns the live tree of devs (see tc.Runner.Read).
	Read(devs ...string) (*tcstats.Snapshot, error)
	// Link reports a network device's state.
	Link(name string) Link
}

// Link is the state of one network device.
type Link struct {
	Exists, Up bool
	// Routable: an address other than link-local, which a PPP or tunnel
	// device only has once its session is usable.
	Routable bool
	// Kind is the rtnetlink link kind ("ifb", "veth", "bridge", ...; ""
	// for a physical port) and Index its ifindex: a stop deletes only an
	// IFB it created, and the index tells a re-created device of the same
	// name from the one it created.
	Kind  string
	Index int
	// TXQueues is the device's number of TX queues (IFLA_NUM_TX_QUEUES):
	// an IFB made for plain cake has one, too few for cake_mq.
	TXQueues int
	// Alias is the device's ifalias: plan.IFBAlias on an IFB sqmkit made.
	Alias string
}

// Prober validates batches before they touch a real device (tc.Prober).
type Prober interface {
	Probe(batches [][][]string) ([]error, error)
}

// System is the running kernel: tc and ip through one tc.Runner, device
// state from netlink (package net).
type System struct{ *tc.Runner }

// Link reads a device's flags and addresses.
func (System) Link(name string) Link {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return Link{}
	}
	l := Link{Exists: true, Up: ifi.Flags&net.FlagUp != 0, Index: ifi.Index}
	l.Kind, l.TXQueues, l.Alias = linkInfo(ifi.Index)
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			l.Routable = true
		}
	}
	return l
}

// iflaNumTXQueues is IFLA_NUM_TX_QUEUES, IFLA_IFALIAS the ifalias; package
// syscall lacks them.
const (
	iflaNumTXQueues = 31
	iflaIfAlias     = 20
)

// linkInfo reads a device's IFLA_INFO_KIND ("" when it has none, a
// physical port), its TX queue count and its alias from one rtnetlink
// dump; zeros when the dump fails.
func linkInfo(index int) (kind string, txQueues int, alias string) {
	b, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return "", 0, ""
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return "", 0, ""
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		// struct ifinfomsg: family, pad, type (2), index (4) at offset 4
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != index {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return "", 0, ""
		}
		for _, a := range attrs {
			switch {
			case a.Attr.Type == syscall.IFLA_LINKINFO:
				kind = infoKind(a.Value)
			case a.Attr.Type == iflaNumTXQueues && len(a.Value) >= 4:
				txQueues = int(binary.NativeEndian.Uint32(a.Value))
			case a.Attr.Type == iflaIfAlias:
				alias = strings.TrimRight(string(a.Value), "\x00")
			}
		}
		return kind, txQueues, alias
	}
	return "", 0, ""
}

// infoKind finds IFLA_INFO_KIND (1) among IFLA_LINKINFO's nested attributes.
func infoKind(b []byte) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4])
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == 1 {
			return strings.TrimRight(string(b[4:l]), "\x00")
		}
		next := (l + 3) &^ 3
		if next >= len(b) {
			return ""
		}
		b = b[next:]
	}
	return ""
}
