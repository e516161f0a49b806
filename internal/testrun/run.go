package testrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/onpath"
	"github.com/sqmkit/sqmkit/internal/rpm"
)

// RouterQueues are root's enabled queues; none off a router (no
// /etc/config/sqm). A file that does not parse is refused: its queues and
// their test_server would silently be lost, and the test would go to the
// public server by a route nobody checked (TestBrokenConfigRefused). A bad
// section alone is start's to report.
func RouterQueues(root string) ([]config.Queue, error) {
	if _, err := config.Load(root, ""); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (fix: correct %s, or move it away)", err, config.Path(root, ""))
	}
	qs, _ := config.Resolve(root, "", nil, "")
	return qs, nil
}

// Hold takes the job locks of root's enabled queues, if it has any, for a
// job of kind (TestHold): a tune does not move their rates
// meanwhile, and autorate pauses until it ends.
func Hold(root, kind, what string) (func(), error) {
	qs, err := RouterQueues(root)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return func() {}, nil // no router config: nothing to hold
	}
	var devs []string
	for _, q := range qs {
		devs = append(devs, q.Interface)
	}
	return joblock.HoldQueues(joblock.QueueDir(root), devs, joblock.Holder{Kind: kind, PID: os.Getpid(), Started: time.Now(), What: what})
}

// Options are one test's: its client's configuration (Config.Server the
// server's address), the server as Resolve gave it, and on a router its
// root and queues (RouterQueues).
type Options struct {
	Config   bbclient.Config
	Server   Server
	Root     string
	Queues   []config.Queue
	AnyRoute bool // test even off the queues' route (and compare no counters)
	Insecure bool // a responsiveness server's certificate unchecked
	// Warn says what went wrong without stopping the test (a record not
	// kept).
	Warn func(string)
}

// Test runs one test from where it runs: on a router only through a queue
// (RouteCheck), holding the queues (Hold), with the shaper's counters and
// the CPU read beside it; the result carries the path checks, the CPU's
// cost (kept for doctor, status and LuCI when the test was whole) and,
// for a server nobody named, where it came from.
func Test(ctx context.Context, o Options) (*bbresult.Result, error) {
	var qs []config.Queue
	if !o.AnyRoute {
		qs = o.Queues
	}
	cfg := o.Config
	on, err := RouteCheck(ctx, o.Root, qs, cfg.Server, cfg.Network, "")
	if err != nil {
		return nil, err
	}
	cfg.Network = on.Network
	release, err := Hold(o.Root, "test", cfg.Server)
	if err != nil {
		return nil, err
	}
	defer release()
	sampling := make(chan struct{})
	samples, cpu := on.counters(sampling), on.cpu(sampling)
	var res *bbresult.Result
	if o.Server.URL {
		res, err = rpm.RunPhases(ctx, rpm.PhaseConfig{Test: cfg, Insecure: o.Insecure})
	} else {
		res, err = bbclient.Run(ctx, cfg)
	}
	close(sampling)
	if err != nil {
		return nil, o.Server.Blame(err)
	}
	if q := on.Queue; q != nil {
		res.Queue = q.Section
		res.PathChecks = onpath.Check(res, q.Section, <-samples)
		res.CPU = cpuload.Costs(res, <-cpu, cpuload.Shaper{Device: q.Interface, RPS: cpuload.RPS(o.Root, q.Interface), XPS: cpuload.XPS(o.Root, q.Interface), Qdisc: q.Qdisc, Down: q.Download, Up: q.Upload})
		if res.Incomplete == "" {
			KeepCPU(o.Root, *q, "test", res.Started, res.CPU, o.Warn)
		}
	}
	if n := o.Server.Note(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return res, nil
}

// KeepCPU keeps what a test or tune measured the router's CPU cost (for
// doctor, status and LuCI: what this router can shape), saying through
// warn when it could not.
func KeepCPU(root string, q config.Queue, by string, at time.Time, phases []bbresult.PhaseCPU, warn func(string)) {
	if len(phases) == 0 {
		return
	}
	if err := cpuload.Save(root, cpuload.Record{Section: q.Section, At: at, By: by, Qdisc: q.Qdisc, Phases: phases}); err != nil && warn != nil {
		warn("the CPU measurement was not kept: " + err.Error())
	}
}
