package testrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/cpuload"
	"github.com/sqmkit/sqmkit/internal/history"
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
			Remember(o.Root, *q, "test", res, res.CPU, nil, o.Warn)
		}
	}
	if n := o.Server.Note(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return res, nil
}

// Remember keeps what a test or a tune on the router learnt of queue q,
// in one write of its flash record (package history): res's grade, when
// it has one, the CPU's cost (also in /var/run, where the doctor reads it
// first) and, for a tune that wrote rates, what it wrote. warn says what
// could not be kept.
func Remember(root string, q config.Queue, by string, res *bbresult.Result, phases []bbresult.PhaseCPU, tuned *history.Tuned, warn func(string)) {
	if warn == nil {
		warn = func(string) {}
	}
	at := time.Now().UTC()
	var cpu []byte
	if len(phases) > 0 {
		r := cpuload.Record{Section: q.Section, At: at, By: by, Qdisc: q.Qdisc, Phases: phases}
		if err := cpuload.Save(root, r); err != nil {
			warn("the CPU measurement was not kept: " + err.Error())
		}
		cpu, _ = json.Marshal(r)
	}
	graded := res != nil && res.Incomplete == "" && res.Grades.DSLReports != ""
	if !graded && cpu == nil && tuned == nil {
		return
	}
	err := history.Update(root, at, func(h *history.History) {
		hq := h.Queue(q.Section)
		if graded {
			e := history.Entry{At: res.Started, By: by, Grade: res.Grades.DSLReports, AddedMs: res.Grades.DSLReportsAddedMs, Down: q.Download, Up: q.Upload, Server: res.Server}
			if tuned != nil {
				e.Down, e.Up, e.LineDown, e.LineUp = tuned.Down, tuned.Up, tuned.LineDown, tuned.LineUp
			}
			hq.Add(e)
		}
		if cpu != nil {
			hq.CPU = cpu
		}
		if tuned != nil {
			hq.Tuned = tuned
		}
	})
	if err != nil {
		warn("the router's record (" + history.Path(root) + ") was not kept: " + err.Error())
	}
}
