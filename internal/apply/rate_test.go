package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// started is a fake kernel with tg started on it, and options that keep
// rates in a temporary directory.
func started(t *testing.T, tg Target) (fake, Options) {
	t.Helper()
	k := newFake()
	o := fakeOptions(t, k)
	o.RateDir = t.TempDir()
	if r := Start([]Target{tg}, o)[0]; r.State != Started {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	return k, o
}

// at is tg's plan at other rates.
func at(t *testing.T, tg Target, down, up int) *plan.Plan {
	t.Helper()
	q := tg.Queue
	q.Download, q.Upload = down, up
	p, err := plan.Build(q, tg.Facts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRateChangesInPlace(t *testing.T) {
	for _, b := range backends {
		for _, c := range []struct {
			name     string
			to       config.Rates
			down, up int // what the kernel must hold after
		}{
			{"both", config.Rates{Download: 18000, Upload: 9000}, 18000, 9000},
			{"download only", config.Rates{Download: 15000}, 15000, 10000},
			{"across 100 Mbit/s", config.Rates{Download: 200000}, 200000, 10000},
		} {
			t.Run(fmt.Sprintf("%s/%s", b, c.name), func(t *testing.T) {
				tg := target(b)
				k, o := started(t, tg)
				before := len(k.Calls)
				r := Rate(tg, c.to, "test", o)
				if r.State != Changed || r.Err != nil {
					t.Fatalf("rate: %s %v", r.State, r.Err)
				}
				// one batch, change lines only: nothing was torn down
				if n := len(k.Calls) - before; n != 1 {
					t.Fatalf("%d batches, want 1: %+v", n, k.Calls[before:])
				}
				for _, l := range k.Calls[before].Lines {
					if l[1] != "change" {
						t.Errorf("a rate change ran %q", strings.Join(l, " "))
					}
				}
				if d := drift.Compare(at(t, tg, c.down, c.up), state(t, k)); len(d) > 0 {
					t.Errorf("kernel differs from the plan at %d/%d: %v", c.down, c.up, d)
				}
				kept, ok, err := ratestate.Load(o.RateDir, "wan")
				if !ok || err != nil || kept.Download != c.down || kept.Upload != c.up || kept.By != "test" {
					t.Errorf("kept %+v %v %v", kept, ok, err)
				}
				// the same rates again change nothing
				if r := Rate(tg, c.to, "test", o); r.State != Skipped {
					t.Errorf("same rates again: %s %v", r.State, r.Err)
				}
			})
		}
	}
}

// A refusal at any line of the change batch leaves the tree at its old
// rates, as planned, and says so.
func TestRateRefusedRollsBack(t *testing.T) {
	for _, b := range backends {
		tg := target(b)
		k, o := started(t, tg)
		before := len(k.Calls)
		Rate(tg, config.Rates{Download: 30000, Upload: 5000}, "probe", o)
		lines := len(k.Calls[before].Lines)
		for line := 1; line <= lines; line++ {
			t.Run(fmt.Sprintf("%s/line%d", b, line), func(t *testing.T) {
				k, o := started(t, tg)
				call := len(k.Calls)
				k.Fault = func(l tcfake.Line) tcfake.Fault {
					if l.Call == call && l.I == line {
						return tcfake.Refuse
					}
					return tcfake.Run
				}
				r := Rate(tg, config.Rates{Download: 30000, Upload: 5000}, "test", o)
				if r.State != Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "rolled back") {
					t.Fatalf("want a refused change, got %s %v", r.State, r.Err)
				}
				if strings.Contains(r.Err.Error(), "differs") {
					t.Errorf("rollback did not restore the tree: %v", r.Err)
				}
				if d := drift.Compare(at(t, tg, 20000, 10000), state(t, k)); len(d) > 0 {
					t.Errorf("after the rollback the kernel differs from the old rates: %v", d)
				}
				if _, ok, _ := ratestate.Load(o.RateDir, "wan"); ok {
					t.Error("a refused change was remembered")
				}
			})
		}
	}
}

func TestRateRefuses(t *testing.T) {
	tg := target(config.Cake)
	for _, c := range []struct {
		name  string
		setup func(k fake, o Options) // from a started queue
		tg    func() Target
		to    config.Rates
		want  string
	}{
		{"not started", func(k fake, o Options) { Stop([]Target{tg}, o) }, nil, config.Rates{Download: 15000}, "run sqmkit start first"},
		{"tree changed by hand", func(k fake, o Options) {
			k.Batch("tc", false, [][]string{{"qdisc", "change", "dev", "wan", "root", "handle", "1:", "cake", "rtt", "50ms"}})
		}, nil, config.Rates{Download: 15000}, "run sqmkit start"},
		{"direction not shaped", nil, func() Target {
			u := tg
			u.Queue.Download = 0
			return u
		}, config.Rates{Download: 15000}, "sqm.wan.download: this queue does not shape its download"},
		{"negative", nil, nil, config.Rates{Upload: -5}, "sqm.wan.upload: a rate is a positive number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			use := tg
			if c.tg != nil {
				use = c.tg()
			}
			k, o := started(t, use)
			if c.setup != nil {
				c.setup(k, o)
			}
			before := len(k.Calls)
			r := Rate(use, c.to, "test", o)
			if r.State != Failed || r.Err == nil || !strings.Contains(r.Err.Error(), c.want) {
				t.Fatalf("want %q, got %s %v", c.want, r.State, r.Err)
			}
			var fe *config.FieldError
			if strings.HasPrefix(c.want, "sqm.") && !errors.As(r.Err, &fe) {
				t.Errorf("not a field error: %T", r.Err)
			}
			if len(k.Calls) != before {
				t.Errorf("a refused rate change ran %+v", k.Calls[before:])
			}
		})
	}
}

// A full start and a stop forget the kept rates: the config is the truth.
func TestStartStopForgetRates(t *testing.T) {
	tg := target(config.Cake)
	for _, c := range []struct {
		name string
		do   func(o Options) Result
	}{
		{"start", func(o Options) Result { return Start([]Target{tg}, o)[0] }},
		{"stop", func(o Options) Result { return Stop([]Target{tg}, o)[0] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, o := started(t, tg)
			if r := Rate(tg, config.Rates{Download: 15000}, "test", o); r.State != Changed {
				t.Fatalf("rate: %s %v", r.State, r.Err)
			}
			c.do(o)
			if _, ok, _ := ratestate.Load(o.RateDir, "wan"); ok {
				t.Errorf("%s kept the rates sqmkit rate set", c.name)
			}
		})
	}
	// a hotplug start keeps them, and plans with them (the caller applies
	// them to the queue): nothing to change
	k, o := started(t, tg)
	Rate(tg, config.Rates{Download: 15000}, "test", o)
	q := tg.Queue
	if _, err := ratestate.Apply(o.RateDir, &q); err != nil {
		t.Fatal(err)
	}
	o.Hotplug = true
	before := len(k.Calls)
	if r := Start([]Target{{Queue: q, Facts: tg.Facts}}, o)[0]; r.State != Skipped || len(k.Calls) != before {
		t.Errorf("hotplug start at the kept rates: %s %v, %d batches", r.State, r.Err, len(k.Calls)-before)
	}
	if _, ok, _ := ratestate.Load(o.RateDir, "wan"); !ok {
		t.Error("a hotplug start forgot the kept rates")
	}
}

// On the host kernel (a test namespace, through the lab shim): a rate
// change leaves the same tree a start at the new rates builds, in one tc
// process besides the read, and never deletes a qdisc.
func TestRateOnHostKernel(t *testing.T) {
	tg := target(config.FQCodel)
	startedOnHost(t, "rate", tg, func(r *tc.Runner, o Options) {
		var lines []string
		r.Debug = func(s string) { lines = append(lines, s) }
		if res := Rate(tg, config.Rates{Download: 15000, Upload: 9000}, "test", o); res.State != Changed {
			t.Fatalf("rate: %s %v", res.State, res.Err)
		}
		if joined := strings.Join(lines, "\n"); strings.Contains(joined, " del ") {
			t.Errorf("a rate change deleted something:\n%s", joined)
		}
		want, _ := normBuild(config.Queue{Section: "wan", Enabled: true, Interface: "wan", Download: 15000, Upload: 9000,
			Backend: config.FQCodel, IngressECN: true, LinkLayer: config.LinkNone}, tg.Facts)
		if d := drift.Compare(want, kernel(t, want)); len(d) > 0 {
			t.Errorf("kernel differs from a start at 15000/9000: %v", d)
		}
	})
}

// startedOnHost starts tg (fq_codel through the lab shim) in a test
// namespace of its own and runs fn there with the runner and options.
func startedOnHost(t *testing.T, name string, tg Target, fn func(*tc.Runner, Options)) {
	useShim(t, "")
	ns := tctest.NewNetns(t, name)
	ns.Do(t, func() {
		r := &tc.Runner{}
		o := options(t, r, t.TempDir())
		o.Build = normBuild
		mustStart(t, []Target{tg}, o)
		fn(r, o)
	})
}

// TestRecoverDeadTune: a tune's rate changes are kept as its trial, never
// as rates to keep; while it holds the queue's job lock the trial stands,
// and once it is gone without putting them back (killed, out of memory)
// the next caller puts back the rates it found and says so.
func TestRecoverDeadTune(t *testing.T) {
	k := newFake()
	o := fakeOptions(t, k)
	o.Jobs, o.RateDir = t.TempDir(), t.TempDir()
	tg := target(config.Cake)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	lock, err := joblock.Take(o.Jobs, joblock.QueueName("wan"), joblock.Holder{Kind: "tune"})
	if err != nil {
		t.Fatal(err)
	}
	tuning := o
	tuning.Trial = &ratestate.Trial{Kept: config.Rates{Download: 20000, Upload: 10000}, PID: 4242}
	if r := Rate(tg, config.Rates{Download: 80000, Upload: 40000}, "sqmkit tune", tuning); r.State != Changed {
		t.Fatalf("the tune's trial rates: %s %v", r.State, r.Err)
	}
	if said := RecoverTrials("", []config.Queue{tg.Queue}, o); len(said) != 0 {
		t.Errorf("a running tune's trial was put back: %q", said)
	}
	lock.Release() // the tune dies
	said := RecoverTrials("", []config.Queue{tg.Queue}, o)
	if len(said) != 1 || !strings.Contains(said[0], "put back to 20000/10000") || !strings.Contains(said[0], "pid 4242") {
		t.Fatalf("recovered %q", said)
	}
	if _, ok, _ := ratestate.Load(o.RateDir, "wan"); ok {
		t.Error("the dead tune's rates are still kept")
	}
	if st := Inspect([]Target{tg}, o)[0]; !st.Matches() {
		t.Errorf("after the recovery the queue is not as planned at its configured rates: %v %v", st.Err, st.Diffs)
	}
}

// TestRateNeedsItsRecord: a rate change whose record cannot be written (a
// full /var/run) changes nothing, so no rate is ever in force that status,
// hotplug or a dead tune's recovery cannot see; a refused change puts the
// previous record back.
func TestRateNeedsItsRecord(t *testing.T) {
	tg := target("cake")
	k, o := started(t, tg)
	if r := Rate(tg, config.Rates{Download: 15000}, "first", o); r.State != Changed {
		t.Fatalf("rate: %s %v", r.State, r.Err)
	}
	blocked := o
	blocked.RateDir = filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(blocked.RateDir, nil, 0o644) // its record's directory cannot be made
	before := len(k.Calls)
	r := Rate(tg, config.Rates{Download: 80000}, "tune", blocked)
	if r.State != Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "record could not be written") {
		t.Fatalf("want a refusal for the record, got %s %v", r.State, r.Err)
	}
	if len(k.Calls) != before {
		t.Errorf("the kernel was changed: %+v", k.Calls[before:])
	}
	f, err := Follow(tg, "autorate", blocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(config.Rates{Download: 80000}); err == nil || !strings.Contains(err.Error(), "record could not be written") {
		t.Errorf("follower: %v", err)
	}
	f.Close()
	if d := drift.Compare(at(t, tg, 15000, 10000), state(t, k)); len(d) > 0 {
		t.Errorf("the kernel left the recorded rates: %v", d)
	}
	// a refused change keeps the record of the rates still in force
	k.Fault = func(tcfake.Line) tcfake.Fault { return tcfake.Refuse }
	if r := Rate(tg, config.Rates{Download: 30000}, "tune", o); r.State != Failed {
		t.Fatalf("refused change: %s %v", r.State, r.Err)
	}
	if kept, ok, _ := ratestate.Load(o.RateDir, "wan"); !ok || kept.Download != 15000 || kept.By != "first" {
		t.Errorf("after a refused change the record holds %+v (%v), want the first change's", kept, ok)
	}
}

// TestPendingLockRefusesSymlink: a hotplug start's coalescing lock is
// opened as the other state files are, never through a planted symlink.
func TestPendingLockRefusesSymlink(t *testing.T) {
	l := &Locks{Dir: t.TempDir()}
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(l.Dir, "wan.pending"))
	if release, err := l.Acquire("wan", true); err == nil {
		release()
		t.Error("the lock was taken through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target holds %q", b)
	}
}
