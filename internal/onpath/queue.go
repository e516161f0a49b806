package onpath

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// Path is the route to one of the server's addresses.
type Path struct {
	Addr   netip.Addr
	Device string        // the device the route leaves by ("" when the lookup failed)
	Queue  *config.Queue // the queue whose device that is or lies under it; nil when none
	Err    error
}

// Paths looks up each address's route (route: Route, or a test's table)
// and the queue of qs on it, as root's files stack the devices.
func Paths(root string, qs []config.Queue, addrs []netip.Addr, route func(netip.Addr) (string, error)) []Path {
	var out []Path
	for _, a := range addrs {
		p := Path{Addr: a}
		p.Device, p.Err = route(a)
		if p.Err == nil {
			stack := linkinfo.Stack(root, p.Device)
			for i := range qs {
				if slices.Contains(stack, qs[i].Interface) {
					p.Queue = &qs[i]
					break
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// Choose picks what a test from the router runs on: the network ("tcp4",
// "tcp6", or network as given when every address is on a queue's path)
// and the queue, which must be want's when want is not "" (a tune's). An
// error names where the route leaves, the queues there are and the fix:
// a test off the queues' path grades a link they do not shape.
func Choose(paths []Path, qs []config.Queue, want, network string) (string, config.Queue, error) {
	var on []Path
	var off []string
	for _, p := range paths {
		switch {
		case network == "tcp4" && !p.Addr.Unmap().Is4(), network == "tcp6" && p.Addr.Unmap().Is4():
			continue
		case p.Err != nil:
			off = append(off, p.Err.Error())
		case p.Queue != nil && (want == "" || p.Queue.Section == want || p.Queue.Interface == want):
			on = append(on, p)
		default:
			off = append(off, fmt.Sprintf("the route to %s leaves by %s", p.Addr, p.Device))
		}
	}
	if len(on) == 0 {
		var names []string
		for _, q := range qs {
			if want == "" || q.Section == want || q.Interface == want {
				names = append(names, fmt.Sprintf("%s on %s", q.Section, q.Interface))
			}
		}
		if len(off) == 0 {
			off = append(off, "the server has no address of that family")
		}
		return "", config.Queue{}, fmt.Errorf("%s, which no queue shapes (queues: %s): the test would measure a link sqmkit does not shape (fix: a server reached through the queue's interface, or --any-route to measure that link anyway)",
			strings.Join(off, "; "), strings.Join(names, ", "))
	}
	q := *on[0].Queue
	v4, v6 := false, false
	for _, p := range on {
		if p.Queue.Section != q.Section {
			continue
		}
		if p.Addr.Unmap().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	if len(off) > 0 || !(v4 && v6) {
		switch {
		case v4 && !v6:
			network = "tcp4"
		case v6 && !v4:
			network = "tcp6"
		}
	}
	return network, q, nil
}
