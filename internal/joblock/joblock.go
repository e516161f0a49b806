// Package joblock keeps one job of a kind at a time across processes: the
// LuCI page's background test or tune, and each queue's measuring job (a
// test or a tune, which autorate must not move the rates under). A lock
// is an open file description lock (fcntl F_OFD_SETLK) on a file, taken in
// one step: there is no moment where the lock exists without an owner,
// and the kernel drops it when the last process holding it dies, however
// it dies, so a dead owner's lock is free for anyone (TestDeadOwner). A
// child given the file (exec's ExtraFiles) holds it on, as with flock, and
// unlike flock's a lock can be queried without taking it, so a page that
// polls "does a job run?" never makes a start fail. The file also names
// the owner, for the message a refused caller shows.
package joblock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Holder is who holds a lock: what it runs, its pid, since when.
type Holder struct {
	Kind    string    `json:"kind"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	What    string    `json:"what,omitempty"` // e.g. the section or server, for the message
}

// Busy is the error of a Take that found the lock held.
type Busy struct {
	Name   string
	Holder Holder // zero when the holder has not written itself yet
}

func (b *Busy) Error() string {
	h := b.Holder
	if h.Kind == "" {
		return fmt.Sprintf("%s is busy: another job holds it; wait for it to end", b.Name)
	}
	if h.Kind == AutorateChange {
		// a change lasts a moment; its Started is the Handle's first write
		return fmt.Sprintf("%s is busy: autorate (pid %d) is changing its rates; wait for it to end", b.Name, h.PID)
	}
	s := fmt.Sprintf("%s is busy: a %s is running", b.Name, h.Kind)
	if h.What != "" {
		s += " (" + h.What + ")"
	}
	return s + fmt.Sprintf(" since %s, pid %d; wait for it to end", h.Started.Local().Format("15:04:05"), h.PID)
}

// Lock is a lock held by this process.
type Lock struct {
	f *os.File
}

// path is the lock file of name in dir.
func path(dir, name string) string { return filepath.Join(dir, name+".lock") }

// Take takes name's lock in dir without waiting, writing h as its owner;
// a held lock is a *Busy error naming the holder.
func Take(dir, name string, h Holder) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := statefile.OpenLock(path(dir, name))
	if err != nil {
		return nil, err
	}
	l := &Lock{f: f}
	if err := l.take(name, h); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// take locks l's file and writes h as its owner.
func (l *Lock) take(name string, h Holder) error {
	if err := l.lock(name); err != nil {
		return err
	}
	if err := l.Owner(h); err != nil {
		l.unlock()
		return err
	}
	return nil
}

// lock locks l's file without waiting; held, a *Busy naming the holder.
func (l *Lock) lock(name string) error {
	if err := unix.FcntlFlock(l.f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			held, _ := read(l.f.Name())
			return &Busy{Name: name, Holder: held}
		}
		return fmt.Errorf("lock %s: %w", l.f.Name(), err)
	}
	return nil
}

// unlock lets the lock go and keeps the file open.
func (l *Lock) unlock() {
	unix.FcntlFlock(l.f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart})
}

// Handle is name's lock in dir for a process that takes it again and
// again (autorate, at each rate change), its file kept open between
// (statefile.Kept). Its owner is written when the file is not as this
// handle last wrote it (new, or another holder wrote itself since), so a
// take is mostly two fcntl calls and an fstat.
type Handle struct {
	name  string
	k     statefile.Kept
	wrote *os.File
	size  int64
	mtime syscall.Timespec
}

// NewHandle is name's lock in dir; nothing is opened until Take.
func NewHandle(dir, name string) *Handle {
	return &Handle{name: name, k: statefile.Kept{Path: path(dir, name)}}
}

// Take takes the lock without waiting, naming h as its owner, until
// release; a held lock is a *Busy error naming the holder.
func (hd *Handle) Take(h Holder) (release func(), err error) {
	f, err := hd.k.File()
	if err != nil {
		return nil, err
	}
	l := &Lock{f: f}
	if err := l.lock(hd.name); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || hd.wrote != f || st.Size != hd.size || st.Mtim != hd.mtime {
		if err := l.Owner(h); err != nil {
			l.unlock()
			return nil, err
		}
		if syscall.Fstat(int(f.Fd()), &st) == nil {
			hd.wrote, hd.size, hd.mtime = f, st.Size, st.Mtim
		}
	}
	return l.unlock, nil
}

// Close closes the lock's file.
func (hd *Handle) Close() { hd.k.Close() }

// Owner writes h as the lock's owner (a job's pid, once it is started).
func (l *Lock) Owner(h Holder) error {
	b, _ := json.Marshal(h)
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt(b, 0)
	return err
}

// File is the locked file, for a child that takes the lock over
// (exec.Cmd.ExtraFiles): the lock stays held while any process has it open.
func (l *Lock) File() *os.File { return l.f }

// Release lets this process's hold go (a child given File keeps it).
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// Held says whether name's lock in dir is held, and by whom.
func Held(dir, name string) (Holder, bool) {
	f, err := os.OpenFile(path(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return Holder{}, false
	}
	q := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &q) != nil || q.Type == unix.F_UNLCK {
		return Holder{}, false
	}
	h, _ := read(path(dir, name))
	return h, true
}

// read is the owner a lock file names.
func read(p string) (Holder, error) {
	var h Holder
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return h, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// QueueDir is where root's per-queue job locks live: one job that moves a
// queue's rates at a time (a test, a tune; autorate takes it for each of
// its changes and pauses while another holds it).
func QueueDir(root string) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "var/run/sqmkit/jobs")
}

// QueueName is the lock of the jobs on the queue shaping dev.
func QueueName(dev string) string { return "queue-" + dev }

// AutorateChange is the Kind autorate's changes hold a queue's lock as,
// each for a moment: HoldQueues waits for one instead of refusing.
const AutorateChange = "autorate change"

// HoldQueues takes the job locks of the queues on devs in dir for a job
// (a test, a tune), all or none; a test or a tune holding one refuses it
// with a *Busy naming the holder, an autorate change is waited for.
func HoldQueues(dir string, devs []string, h Holder) (release func(), err error) {
	var held []*Lock
	release = func() {
		for _, l := range held {
			l.Release()
		}
	}
	if dir == "" {
		return release, nil
	}
	for _, dev := range devs {
		for try := 0; ; try++ {
			l, err := Take(dir, QueueName(dev), h)
			var busy *Busy
			if errors.As(err, &busy) && busy.Holder.Kind == AutorateChange && try < 40 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err != nil {
				release()
				return nil, err
			}
			held = append(held, l)
			break
		}
	}
	return release, nil
}
