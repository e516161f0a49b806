package testrun

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sqmkit/sqmkit/internal/apply"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/onpath"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/sampler"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// OnQueue is what a test or tune run on a router knows of the queue its
// traffic takes (package onpath); Queue is nil off a router.
type OnQueue struct {
	Network string
	Queue   *config.Queue
	root    string
}

// RouteCheck refuses a server whose route leaves the router by a device
// none of qs shapes (only want's, when want is a tune's section): the
// test would grade another link. Network comes back narrowed to the
// family on the path. qs empty: not a router, nothing to check.
func RouteCheck(ctx context.Context, root string, qs []config.Queue, server, network, want string) (OnQueue, error) {
	if len(qs) == 0 {
		return OnQueue{Network: network}, nil
	}
	if hp, _, ok := bbproto.SplitURL(server); ok {
		server = hp // a responsiveness server's URL: its host
	}
	host, _ := bbproto.SplitHostPort(server)
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(lctx, "ip", host); err != nil {
			return OnQueue{}, fmt.Errorf("server %s: %w", host, err)
		}
	}
	n, q, err := onpath.Choose(onpath.Paths(root, qs, addrs, onpath.Route), qs, want, network)
	if err != nil {
		return OnQueue{}, err
	}
	return OnQueue{Network: n, Queue: &q, root: root}, nil
}

// counters samples the queue's shaper counters (its planned roots: the
// device for the upload, the IFB for the download) until stop closes.
func (o OnQueue) counters(stop <-chan struct{}) <-chan []onpath.Sample {
	done := make(chan []onpath.Sample, 1)
	if o.Queue == nil {
		close(done)
		return done
	}
	var up, down string
	if ts, err := apply.Targets(o.root, []config.Queue{*o.Queue}, ""); err == nil {
		if p, err := plan.Build(ts[0].Queue, ts[0].Facts); err == nil {
			for _, d := range p.Dirs {
				if d.Direction == config.Upload {
					up = d.Device
				} else {
					down = d.Device
				}
			}
		}
	}
	r := &tc.Runner{}
	read := func() (uint64, uint64, error) {
		// one tc process a sample: the roots' counters are all it needs
		out, err := r.Output("-s", "qdisc", "show")
		if err != nil {
			return 0, 0, err
		}
		recs, err := tcstats.Parse(out)
		if err != nil {
			return 0, 0, err
		}
		s := tcstats.Snapshot{Records: recs}
		var n [2]uint64
		for i, dev := range []string{up, down} {
			if dev == "" {
				continue
			}
			rec := s.Root(dev)
			if rec == nil || rec.IsDefault() {
				return 0, 0, fmt.Errorf("%s has no shaper", dev) // not started: nothing to compare
			}
			n[i] = rec.Stats.Bytes
		}
		return n[0], n[1], nil
	}
	go func() {
		done <- sampler.Every(stop, sampleEvery, func() (onpath.Sample, error) {
			start := time.Now()
			up, down, err := read()
			// the counters were read somewhere in the tc process's run: a
			// busy host's takes hundreds of ms
			return onpath.Sample{At: start.Add(time.Since(start) / 2), Up: up, Down: down}, err
		})
	}()
	return done
}

// sampleEvery: two reads a second give a 10 s phase twenty, at one tc
// process each.
const sampleEvery = 500 * time.Millisecond

// cpu samples the router's CPU counters (package cpuload) until stop
// closes; nothing off a router.
func (o OnQueue) cpu(stop <-chan struct{}) <-chan []cpuload.Sample {
	if o.Queue == nil {
		done := make(chan []cpuload.Sample)
		close(done)
		return done
	}
	return cpuload.Sampling(o.root, o.Queue.Interface, stop)
}
