package apply

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/applied"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
	"github.com/sqmkit/sqmkit/internal/tcstats"
)

// fake adapts the simulated kernel to Kernel; these tests need no root.
type fake struct{ *tcfake.Kernel }

func (f fake) Link(name string) Link {
	return Link(f.Kernel.Link(name))
}

func newFake() fake {
	k := &tcfake.Kernel{}
	k.AddDevice("wan", true)
	return fake{k}
}

func fakeOptions(t testing.TB, k fake) Options {
	return Options{Kernel: k, Log: func(s string) { t.Log(s) }, Records: applied.Store{Dir: t.TempDir()}}
}

var backends = []config.Backend{config.NSS, config.Cake, config.FQCodel}

// state reads the simulated kernel.
func state(t testing.TB, k fake) *tcstats.Snapshot {
	t.Helper()
	s, err := k.Read("wan", "ifb4wan", "ifb@wan")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// invariants checks what every outcome must satisfy: each direction is
// fully shaped or has no qdisc of its own, no redirect points at an
// unshaped IFB, and the result says exactly what the kernel holds.
func invariants(t testing.TB, k fake, r Result) {
	t.Helper()
	s := state(t, k)
	noBlackHole(t, s, "wan")
	if r.Plan == nil {
		return
	}
	for j, d := range r.Plan.Dirs {
		dr := r.Dirs[j]
		missing := 0
		for _, df := range drift.Dir(r.Plan, d, s) {
			if df.Kind == drift.Missing {
				missing++
			}
		}
		ifb := ""
		if d.Direction == config.Download {
			ifb = r.Plan.IFB
		}
		_, left := ours(s, "wan", ifb, d.Direction)
		shaped := missing == 0 && len(left) > 0
		switch {
		case dr.Err == nil && !shaped:
			t.Errorf("%s reported shaped, but the kernel lacks %d nodes: %s", d.Direction.Side(), missing, ids(s))
		case dr.Err != nil && dr.NotStarted:
		case dr.Err != nil && !slices.Equal(dr.Left, left):
			t.Errorf("%s failed; reported left %q, kernel holds %q", d.Direction.Side(), dr.Left, left)
		}
	}
}

func refuseAt(call, line int) func(tcfake.Line) tcfake.Fault {
	return func(l tcfake.Line) tcfake.Fault {
		if l.Call == call && l.I == line {
			return tcfake.Refuse
		}
		return tcfake.Run
	}
}

// callOf finds the batch that carries direction d's first tree line.
func callOf(k fake, d *plan.Dir) int {
	n, _ := lineOf(k, d)
	return n
}

// lineOf finds the batch that carries direction d's first tree line and
// how many lines (the teardown riding in front of egress) precede it.
func lineOf(k fake, d *plan.Dir) (call, offset int) {
	for n, c := range k.Calls {
		for i, l := range c.Lines {
			if slices.Equal(l, d.TC[0]) {
				return n, i
			}
		}
	}
	return -1, 0
}

// A refusal at every line of either direction's batch, on every backend:
// that direction ends with no qdisc, the other is shaped.
func TestFaultEveryLine(t *testing.T) {
	for _, b := range backends {
		tg := target(b)
		p, err := plan.Build(tg.Queue, tg.Facts)
		if err != nil {
			t.Fatal(err)
		}
		for di, d := range p.Dirs {
			for line := 1; line <= len(d.TC); line++ {
				for _, die := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/line%d/die=%v", b, d.Direction.Side(), line, die), func(t *testing.T) {
						// a dry start records which batch is which
						probe := newFake()
						Start([]Target{tg}, fakeOptions(t, probe))
						call, offset := lineOf(probe, d)
						k := newFake()
						k.Fault = func(l tcfake.Line) tcfake.Fault {
							if l.Call != call || l.I != offset+line {
								return tcfake.Run
							}
							if die {
								return tcfake.Die
							}
							return tcfake.Refuse
						}
						r := Start([]Target{tg}, fakeOptions(t, k))[0]
						if slices.Contains(d.TC[line-1], "ecn") && !die {
							// a refused ecn keyword is retried without ECN
							if r.State != Started || len(r.Dirs[di].Warnings) == 0 {
								t.Errorf("want a start without ECN, got %s %+v", r.State, r.Dirs)
							}
							invariants(t, k, r)
							return
						}
						if r.State != Partial || r.Dirs[di].Err == nil || r.Dirs[1-di].Err != nil {
							t.Fatalf("want only %s failed, got %s %+v", d.Direction.Side(), r.State, r.Dirs)
						}
						if len(r.Dirs[di].Left) > 0 {
							t.Errorf("rollback left %q", r.Dirs[di].Left)
						}
						invariants(t, k, r)
					})
				}
			}
		}
	}
}

// The rollback itself is refused: the failure says what is left, and the
// redirect still never points at an unshaped IFB.
func TestFaultRollbackFails(t *testing.T) {
	for _, b := range backends {
		tg := target(b)
		p, _ := plan.Build(tg.Queue, tg.Facts)
		in := p.Dirs[1]
		// fail the ingress batch at its last line (the redirect), then
		// refuse the first line of every later batch (the rollback)
		t.Run(string(b), func(t *testing.T) {
			probe := newFake()
			Start([]Target{tg}, fakeOptions(t, probe))
			call := callOf(probe, in)
			k := newFake()
			k.Fault = func(l tcfake.Line) tcfake.Fault {
				switch {
				case l.Call == call && l.I == len(in.TC), l.Call > call && l.I == 1:
					return tcfake.Refuse
				}
				return tcfake.Run
			}
			r := Start([]Target{tg}, fakeOptions(t, k))[0]
			if r.Dirs[1].Err == nil || len(r.Dirs[1].Left) == 0 {
				t.Fatalf("want the ingress failure to report what its failed rollback left, got %+v", r.Dirs[1])
			}
			invariants(t, k, r)
		})
	}
}

// The first batch (removing what an earlier start left) cannot run: the
// start changes nothing and says so.
func TestFaultTeardownCannotRun(t *testing.T) {
	tg := target(config.Cake)
	k := newFake()
	o := fakeOptions(t, k)
	Start([]Target{tg}, o)
	before := ids(state(t, k))
	k.Fault = func(l tcfake.Line) tcfake.Fault { return tcfake.Missing }
	r := Start([]Target{tg}, o)[0]
	if r.State != Failed || r.Dirs[0].Err == nil || r.Dirs[1].Err == nil || !strings.Contains(r.Dirs[0].Err.Error(), "removing the previous qdiscs") {
		t.Fatalf("want both directions failed by the teardown, got %s %+v", r.State, r.Dirs)
	}
	if after := ids(state(t, k)); after != before {
		t.Errorf("kernel changed:\n%s\n->\n%s", before, after)
	}
}

// `ip link set up` fails after `link add` succeeded: the new IFB is deleted
// again, ingress is not applied, egress is.
func TestFaultIFBUpFails(t *testing.T) {
	tg := target(config.FQCodel)
	k := newFake()
	k.Fault = func(l tcfake.Line) tcfake.Fault {
		if l.Prog == "ip" && l.I == 2 {
			return tcfake.Refuse
		}
		return tcfake.Run
	}
	r := Start([]Target{tg}, fakeOptions(t, k))[0]
	if r.State != Partial || r.Dirs[0].Err != nil || r.Dirs[1].Err == nil || !strings.Contains(r.Dirs[1].Err.Error(), "removed again") {
		t.Fatalf("want egress shaped, ingress failed with the IFB removed, got %s %+v", r.State, r.Dirs)
	}
	if k.Exists("ifb4wan") {
		t.Error("the half-made IFB is still there")
	}
	invariants(t, k, r)
}

// tc refuses ecn, and the retry without it is refused too: the direction is
// clean, and the warning about ECN still tells what was tried.
func TestFaultECNRetryFails(t *testing.T) {
	tg := target(config.NSS)
	k := newFake()
	ecnSeen := false
	k.Fault = func(l tcfake.Line) tcfake.Fault {
		if slices.Contains(l.Argv, "ecn") {
			ecnSeen = true
			return tcfake.Refuse
		}
		if ecnSeen && slices.Contains(l.Argv, "nssfq_codel") {
			return tcfake.Refuse // the retry's leaf
		}
		return tcfake.Run
	}
	r := Start([]Target{tg}, fakeOptions(t, k))[0]
	in := r.Dirs[1]
	if in.Err == nil || len(in.Warnings) == 0 || len(in.Left) > 0 || r.Plan.Dirs[1].ECN {
		t.Fatalf("want ingress failed after an ECN retry, clean: %+v", in)
	}
	invariants(t, k, r)
}

// The device or the IFB disappears between batches (a PPPoE session drops
// while sqmkit starts): the failure is reported and nothing black-holes.
func TestFaultDeviceVanishes(t *testing.T) {
	for _, c := range []struct{ name, dev string }{{"wan", "wan"}, {"ifb", "ifb4wan"}} {
		t.Run(c.name, func(t *testing.T) {
			tg := target(config.Cake)
			probe := newFake()
			Start([]Target{tg}, fakeOptions(t, probe))
			p, _ := plan.Build(tg.Queue, tg.Facts)
			call := callOf(probe, p.Dirs[1])
			k := newFake()
			k.Before = func(k *tcfake.Kernel, n int) {
				if n == call {
					k.RemoveDevice(c.dev)
				}
			}
			r := Start([]Target{tg}, fakeOptions(t, k))[0]
			if r.Dirs[1].Err == nil {
				t.Fatalf("ingress reported shaped on a vanished %s: %+v", c.dev, r.Dirs)
			}
			invariants(t, k, r)
		})
	}
}

// A stop that cannot run, or whose batch is refused, fails and says what
// remains; it never prints "stopped" over a shaped kernel.
func TestFaultStop(t *testing.T) {
	for _, f := range []tcfake.Fault{tcfake.Missing, tcfake.Refuse} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			tg := target(config.FQCodel)
			k := newFake()
			o := fakeOptions(t, k)
			Start([]Target{tg}, o)
			k.Fault = func(l tcfake.Line) tcfake.Fault { return f }
			r := Stop([]Target{tg}, o)[0]
			if r.State != Failed || !r.Failed() || r.Err == nil || !strings.Contains(r.Err.Error(), "still there") {
				t.Fatalf("want a failed stop naming what remains, got %s %v", r.State, r.Err)
			}
			k.Fault = nil
			if r = Stop([]Target{tg}, o)[0]; r.State != Stopped || len(r.Done) != 4 {
				t.Fatalf("stop after the fault: %s %v %q", r.State, r.Err, r.Done)
			}
			if s := state(t, k); s.Shaped("wan") || s.IngressQdisc("wan") != nil || k.Exists("ifb4wan") {
				t.Errorf("stop left %s", ids(s))
			}
		})
	}
}

// Stop removes only sqmkit's trees: a root somebody else configured stays.
func TestStopLeavesForeignRoot(t *testing.T) {
	k := newFake()
	if _, err := k.Batch("tc", false, [][]string{{"qdisc", "add", "dev", "wan", "root", "handle", "5:", "tbf", "rate", "1mbit"}}); err != nil {
		t.Fatal(err)
	}
	r := Stop([]Target{target(config.Cake)}, fakeOptions(t, k))[0]
	if r.State != Stopped || len(r.Done) != 0 {
		t.Fatalf("stop: %s %v %q", r.State, r.Err, r.Done)
	}
	if s := state(t, k); !s.Shaped("wan") || s.Root("wan").Handle != "5:" {
		t.Errorf("stop removed a foreign root: %s", ids(s))
	}
}

// A device name with '#' cannot be carried by a batch: nothing runs, and
// no message claims a removal or a rollback that never happened.
func TestNoClaimsForBatchesThatNeverRan(t *testing.T) {
	tg := target(config.Cake)
	tg.Queue.Interface = "wan#1"
	k := newFake()
	k.AddDevice("wan#1", true)
	var logs []string
	o := fakeOptions(t, k)
	o.Log = func(s string) { logs = append(logs, s) }
	r := Start([]Target{tg}, o)[0]
	if !r.Failed() {
		t.Fatalf("start on wan#1: %s", r.State)
	}
	for _, l := range logs {
		if strings.Contains(l, "removed previous") || strings.Contains(l, "rolled back") {
			t.Errorf("claims what never ran: %q", l)
		}
	}
	if len(k.Calls) != 0 {
		t.Errorf("%d batches ran", len(k.Calls))
	}
}
