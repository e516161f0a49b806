package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// DefaultLockDir holds one lock file per interface. /var/run is a tmpfs on
// Debian (/run) and on OpenWrt (/tmp/run), so locks never touch flash.
const DefaultLockDir = "/var/run/sqmkit/lock"

// Locks serialises every change to one interface's shaper across processes:
// a hotplug event, a procd reload, autorate and a user can all start at
// once, and two starts interleaving their batches undo each other. Each
// holder runs whole, so the last start leaves its whole tree. The locks are
// flock(2) locks: the kernel drops them when a holder dies, so none is ever
// stale.
type Locks struct {
	Dir  string        // DefaultLockDir on a router
	Wait time.Duration // how long to wait for the holder; then give up with a message
}

// errPending: a hotplug start found another one already waiting for the
// lock; that one reads the live tree after this event, so this one is done.
var errPending = errors.New("another start from a hotplug event is already waiting for this interface; it will apply the current state")

func lockState(err error) State {
	if errors.Is(err, errPending) {
		return Skipped
	}
	return Failed
}

// Acquire takes iface's lock, waiting up to l.Wait. With coalesce (hotplug
// events), it returns errPending at once when another coalescing start is
// already waiting: a storm of 200 events then costs a handful of applies,
// and the last waiter still sees the final state. A nil Locks locks nothing.
func (l *Locks) Acquire(iface string, coalesce bool) (release func(), err error) {
	return l.acquire(iface, coalesce)
}

func (l *Locks) acquire(iface string, coalesce bool) (func(), error) {
	if l == nil {
		return func() {}, nil
	}
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	var pending *os.File
	if coalesce {
		f, err := statefile.OpenLock(filepath.Join(l.Dir, iface+".pending"))
		if err != nil {
			return nil, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			return nil, errPending
		}
		pending = f
		defer pending.Close() // once this start holds the lock, the next event may wait
	}
	path := filepath.Join(l.Dir, iface+".lock")
	f, err := statefile.OpenLock(path)
	if err != nil {
		return nil, err
	}
	if err := l.wait(f, iface); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// wait flocks f, iface's lock file, waiting up to l.Wait for its holder.
func (l *Locks) wait(f *os.File, iface string) error {
	deadline := time.Now().Add(l.Wait)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("another sqmkit is changing %s's shaper (lock %s) and did not finish within %s; try again when it is done", iface, f.Name(), l.Wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// keep is iface's lock for a process that changes its shaper again and
// again (a Follower), its file kept open between (acquireKept).
func (l *Locks) keep(iface string) *statefile.Kept {
	if l == nil {
		return nil
	}
	return &statefile.Kept{Path: filepath.Join(l.Dir, iface+".lock")}
}

// acquireKept is acquire (without coalescing) through a kept lock file.
func (l *Locks) acquireKept(k *statefile.Kept, iface string) (func(), error) {
	if l == nil {
		return func() {}, nil
	}
	f, err := k.File()
	if err != nil {
		return nil, err
	}
	if err := l.wait(f, iface); err != nil {
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
