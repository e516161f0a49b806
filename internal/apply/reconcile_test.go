package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/drift"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
)

func hotplug(t testing.TB, k fake) Options {
	o := fakeOptions(t, k)
	o.Hotplug = true
	return o
}

func asPlanned(t testing.TB, k fake, tg Target) {
	t.Helper()
	p, err := plan.Build(tg.Queue, tg.Facts)
	if err != nil {
		t.Fatal(err)
	}
	if ds := drift.Compare(p, state(t, k)); len(ds) > 0 {
		t.Errorf("kernel differs from the plan: %v", ds)
	}
}

// touched reports a batch since call from that changed dev itself (a
// redirect that names dev as its target does not).
func touched(k fake, from int, dev string) bool {
	for _, c := range k.Calls[from:] {
		for _, l := range c.Lines {
			if c.Prog == "ip" && slices.Contains(l, dev) || len(l) > 3 && l[2] == "dev" && l[3] == dev {
				return true
			}
		}
	}
	return false
}

// An ifupdate storm on a shaped link changes nothing: one read per event,
// no batch.
func TestHotplugAlreadyShaped(t *testing.T) {
	for _, b := range backends {
		tg := target(b)
		k := newFake()
		Start([]Target{tg}, fakeOptions(t, k))
		before := len(k.Calls)
		for range 10 {
			r := Start([]Target{tg}, hotplug(t, k))[0]
			if r.State != Skipped || r.Failed() || !r.Dirs[0].Kept || !r.Dirs[1].Kept {
				t.Fatalf("%s: hotplug on a shaped link: %s %v %+v", b, r.State, r.Err, r.Dirs)
			}
		}
		if n := len(k.Calls) - before; n != 0 {
			t.Errorf("%s: 10 events ran %d batches, want 0", b, n)
		}
	}
}

// A PPPoE reconnect re-creates the WAN device bare while its IFB keeps its
// shaper: the hotplug start shapes it again, and never touches the IFB.
func TestHotplugRecreatedDevice(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			tg := target(b)
			k := newFake()
			Start([]Target{tg}, fakeOptions(t, k))
			k.RemoveDevice("wan")
			k.AddDevice("wan", true)
			from := len(k.Calls)
			r := Start([]Target{tg}, hotplug(t, k))[0]
			if r.State != Started || r.Failed() {
				t.Fatalf("hotplug after re-creation: %s %v %+v", r.State, r.Err, r.Dirs)
			}
			asPlanned(t, k, tg)
			if ifb := r.Plan.IFB; touched(k, from, ifb) {
				t.Errorf("the shaped IFB %s was touched: %+v", ifb, k.Calls[from:])
			}
			invariants(t, k, r)
		})
	}
}

// A changed config (another download rate) reaches the IFB on hotplug.
func TestHotplugChangedRate(t *testing.T) {
	tg := target(config.NSS)
	k := newFake()
	Start([]Target{tg}, fakeOptions(t, k))
	tg.Queue.Download = 30000
	from := len(k.Calls)
	r := Start([]Target{tg}, hotplug(t, k))[0]
	if r.State != Started || !r.Dirs[0].Kept || r.Dirs[1].Kept {
		t.Fatalf("want egress kept, ingress rebuilt: %s %+v", r.State, r.Dirs)
	}
	if touched(k, from, "root") && !touched(k, from, "ifb@wan") {
		t.Error("the ingress rebuild did not reach the IFB")
	}
	asPlanned(t, k, tg)
}

// A direction the config no longer shapes is cleared on hotplug.
func TestHotplugClearsStaleDirection(t *testing.T) {
	tg := target(config.Cake)
	k := newFake()
	Start([]Target{tg}, fakeOptions(t, k))
	tg.Queue.Upload = 0
	r := Start([]Target{tg}, hotplug(t, k))[0]
	if r.Failed() || state(t, k).Shaped("wan") {
		t.Fatalf("the stale egress shaper stayed: %s %+v", r.State, r.Dirs)
	}
	asPlanned(t, k, tg)
}

func TestLockSerialises(t *testing.T) {
	l := &Locks{Dir: t.TempDir(), Wait: 5 * time.Second}
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := l.Acquire("wan", false)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once", most)
	}
}

func TestLockTimeoutAndCoalesce(t *testing.T) {
	l := &Locks{Dir: t.TempDir(), Wait: 100 * time.Millisecond}
	release, err := l.Acquire("wan", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("wan", false); err == nil || !strings.Contains(err.Error(), "did not finish within 100ms") {
		t.Errorf("second holder: %v, want a timeout naming the wait", err)
	}
	// a hotplug start waits; a second one finds it waiting and is done
	l.Wait = 5 * time.Second
	got := make(chan error, 1)
	go func() {
		r, err := l.Acquire("wan", true)
		if err == nil {
			r()
		}
		got <- err
	}()
	// Wait until the first start holds wan.pending, read from /proc/locks: a
	// probing flock of our own could make that start see a waiter and give up.
	if !flockedSoon(t, filepath.Join(l.Dir, "wan.pending"), 5*time.Second) {
		t.Fatal("the first hotplug start never took wan.pending")
	}
	if _, second := l.Acquire("wan", true); !errors.Is(second, errPending) {
		t.Errorf("second hotplug start: %v, want errPending", second)
	}
	release()
	if err := <-got; err != nil {
		t.Errorf("the waiting hotplug start: %v", err)
	}
	if _, err := l.Acquire("wan", true); err != nil {
		t.Errorf("after both: %v", err)
	}
}

// Concurrent starts through the locks all end with the whole tree.
func TestConcurrentStartsLocked(t *testing.T) {
	tg := target(config.FQCodel)
	k := newFake()
	locks := &Locks{Dir: t.TempDir(), Wait: 10 * time.Second}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := fakeOptions(t, k)
			o.Locks = locks
			if r := Start([]Target{tg}, o)[0]; r.Failed() {
				t.Errorf("start: %s %+v", r.State, r.Dirs)
			}
		}()
	}
	wg.Wait()
	asPlanned(t, k, tg)
	_ = tcfake.Run
}

// flockedSoon reports whether some process holds a flock on path within
// wait, from /proc/locks (which lists the lock by inode and never takes one).
func flockedSoon(t *testing.T, path string, wait time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var st syscall.Stat_t
		if syscall.Stat(path, &st) != nil {
			continue
		}
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("no /proc/locks to watch the lock with: %v", err)
		}
		suffix := fmt.Sprintf(":%d", st.Ino)
		for _, line := range strings.Split(string(locks), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && f[1] == "FLOCK" && strings.HasSuffix(f[5], suffix) {
				return true
			}
		}
	}
	return false
}
