package apply

import (
	"net"

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
	l := Link{Exists: true, Up: ifi.Flags&net.FlagUp != 0}
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			l.Routable = true
		}
	}
	return l
}
