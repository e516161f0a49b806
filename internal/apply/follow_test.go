package apply

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/ratestate"
	"github.com/sqmkit/sqmkit/internal/tc"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
)

// A follower reads the tree once and then only changes it: every Set
// leaves the kernel at the plan of its rates, remembered for status, with
// no read in between; a refused change rolls back and leaves the previous
// rates in place.
func TestFollow(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			tg := target(b)
			k, o := started(t, tg)
			f, err := Follow(tg, "autorate", o)
			if err != nil {
				t.Fatal(err)
			}
			reads := k.Reads
			for _, r := range []config.Rates{{Download: 18000, Upload: 9000}, {Download: 25000}, {Upload: 4000}, {Download: 25000, Upload: 4000}} {
				if err := f.Set(r); err != nil {
					t.Fatalf("set %+v: %v", r, err)
				}
			}
			if k.Reads != reads {
				t.Errorf("%d reads of the tree while following", k.Reads-reads)
			}
			if d := drift.Compare(at(t, tg, 25000, 4000), state(t, k)); len(d) > 0 {
				t.Errorf("kernel differs from the plan at 25000/4000: %v", d)
			}
			if got := f.Rates(); got != (config.Rates{Download: 25000, Upload: 4000}) {
				t.Errorf("rates %+v", got)
			}
			if kept, ok, _ := ratestate.Load(o.RateDir, "wan"); !ok || kept.Download != 25000 || kept.Upload != 4000 || kept.By != "autorate" {
				t.Errorf("kept %+v %v", kept, ok)
			}
			call := len(k.Calls)
			k.Fault = func(l tcfake.Line) tcfake.Fault {
				if l.Call == call && l.I == 1 {
					return tcfake.Refuse
				}
				return tcfake.Run
			}
			if err := f.Set(config.Rates{Download: 30000, Upload: 5000}); err == nil || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("refused change: %v", err)
			}
			k.Fault = nil
			if d := drift.Compare(at(t, tg, 25000, 4000), state(t, k)); len(d) > 0 {
				t.Errorf("after a refused change the kernel differs from the previous rates: %v", d)
			}
			if err := f.Set(config.Rates{Download: 30000, Upload: 5000}); err != nil {
				t.Errorf("after a refusal: %v", err)
			}
		})
	}
}

// A tree someone else replaced (a hotplug start after a PPPoE reconnect,
// a manual rate change) is found again by Resync.
func TestFollowResync(t *testing.T) {
	tg := target(config.Cake)
	_, o := started(t, tg)
	f, err := Follow(tg, "autorate", o)
	if err != nil {
		t.Fatal(err)
	}
	if r := Rate(tg, config.Rates{Download: 12000, Upload: 6000}, "sqmkit rate", o); r.State != Changed {
		t.Fatal(r.Err)
	}
	got, err := f.Resync()
	if err != nil || got != (config.Rates{Download: 12000, Upload: 6000}) {
		t.Fatalf("resync: %+v %v", got, err)
	}
	o2 := o
	o2.Kernel = newFake() // nothing running
	if _, err := Follow(tg, "autorate", o2); err == nil || !strings.Contains(err.Error(), "sqmkit start") {
		t.Errorf("following an unshaped queue: %v", err)
	}
}

// On the host kernel the follower's changes go to one long-lived tc:
// however many changes, one process.
func TestFollowOnHostKernel(t *testing.T) {
	tg := target(config.FQCodel)
	startedOnHost(t, "follow", tg, func(r *tc.Runner, o Options) {
		f, err := Follow(tg, "autorate", o)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		before := r.Procs()
		for i := range 10 {
			if err := f.Set(config.Rates{Download: 15000 + 1000*i, Upload: 9000 - 100*i}); err != nil {
				t.Fatalf("set %d: %v", i, err)
			}
		}
		if n := r.Procs() - before; n != 1 {
			t.Errorf("%d processes for ten changes, want 1", n)
		}
		want, _ := normBuild(config.Queue{Section: "wan", Enabled: true, Interface: "wan", Download: 24000, Upload: 8100,
			Backend: config.FQCodel, IngressECN: true, LinkLayer: config.LinkNone}, tg.Facts)
		if d := drift.Compare(want, kernel(t, want)); len(d) > 0 {
			t.Errorf("kernel differs from a start at 24000/8100: %v", d)
		}
	})
}

// TestFollowPausesForJobs: while a test or a tune holds the queue, a
// follower's change is not made (Paused, naming the holder); once the
// job ends it is.
func TestFollowPausesForJobs(t *testing.T) {
	o := fakeOptions(t, newFake())
	o.Jobs = t.TempDir()
	f := startFollowing(t, o)
	lock, err := joblock.Take(o.Jobs, joblock.QueueName("wan"), joblock.Holder{Kind: "tune", PID: 77})
	if err != nil {
		t.Fatal(err)
	}
	var paused *Paused
	if err := f.Set(config.Rates{Download: 15000}); !errors.As(err, &paused) || !strings.Contains(err.Error(), "tune on wan (pid 77") {
		t.Fatalf("a change while a tune holds the queue: %v", err)
	}
	if f.Rates().Download != 20000 {
		t.Errorf("the rates moved while paused: %+v", f.Rates())
	}
	lock.Release()
	if err := f.Set(config.Rates{Download: 15000}); err != nil || f.Rates().Download != 15000 {
		t.Errorf("after the tune: %v %+v", err, f.Rates())
	}
}

// TestFollowKeepsLocks: a follower keeps its two lock files open between
// changes, but holds neither lock between them (a start and a tune take
// them); a job lock file made anew (its directory removed) is the one a
// change then takes.
func TestFollowKeepsLocks(t *testing.T) {
	o := fakeOptions(t, newFake())
	o.Jobs = filepath.Join(t.TempDir(), "jobs")
	o.Locks = &Locks{Dir: t.TempDir(), Wait: 50 * time.Millisecond}
	f := startFollowing(t, o)
	if err := f.Set(config.Rates{Download: 15000}); err != nil {
		t.Fatal(err)
	}
	lockFile, _ := f.lock.File()
	for i, down := range []int{16000, 17000} {
		if err := f.Set(config.Rates{Download: down}); err != nil {
			t.Fatal(err)
		}
		if now, _ := f.lock.File(); now != lockFile {
			t.Errorf("change %d opened the lock file again", i)
		}
		release, err := o.Locks.Acquire("wan", false)
		if err != nil {
			t.Fatalf("a start after change %d: %v", i, err)
		}
		release()
		l, err := joblock.Take(o.Jobs, joblock.QueueName("wan"), joblock.Holder{Kind: "tune"})
		if err != nil {
			t.Fatalf("a tune after change %d: %v", i, err)
		}
		l.Release()
	}
	release, err := o.Locks.Acquire("wan", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(config.Rates{Download: 18000}); err == nil || !strings.Contains(err.Error(), "another sqmkit is changing wan") {
		t.Errorf("a change while a start holds the lock: %v", err)
	}
	release()
	if err := os.RemoveAll(o.Jobs); err != nil {
		t.Fatal(err)
	}
	l, err := joblock.Take(o.Jobs, joblock.QueueName("wan"), joblock.Holder{Kind: "tune", PID: 78})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var paused *Paused
	if err := f.Set(config.Rates{Download: 18000}); !errors.As(err, &paused) || paused.Holder.PID != 78 {
		t.Errorf("a change while a tune holds the job lock made anew: %v", err)
	}
}

// startFollowing starts a cake queue with o and follows it until the test
// ends.
func startFollowing(t *testing.T, o Options) *Follower {
	t.Helper()
	tg := target(config.Cake)
	if r := Start([]Target{tg}, o)[0]; r.Failed() {
		t.Fatalf("start: %s %v", r.State, r.Err)
	}
	f, err := Follow(tg, "autorate", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
