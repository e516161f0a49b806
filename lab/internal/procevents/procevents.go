// Package procevents counts the processes a command spawns, from the
// kernel's own process events (the netlink process connector): every fork
// and exec anywhere below the command's process, shell subshells and
// programs started by absolute path included, which a wrapper on PATH would
// miss. It needs root and a kernel with CONFIG_PROC_EVENTS (Debian's has
// it).
package procevents

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Linux connector and process-event constants (linux/connector.h,
// linux/cn_proc.h).
const (
	cnIdxProc          = 0x1
	cnValProc          = 0x1
	procCnMcastListen  = 1
	procCnMcastIgnore  = 2
	procEventFork      = 0x00000001
	procEventExec      = 0x00000002
	procEventExit      = 0x80000000
	nlmsgHdrLen        = 16
	cnMsgLen           = 20
	procEventHeaderLen = 16 // what, cpu, timestamp_ns
)

// Counts is what the processes started during a measurement did.
type Counts struct {
	// Processes are every process that existed: the ones this program
	// started and all they forked (threads are not processes).
	Processes int
	Execs     int // programs run (execve), the started ones included
}

// Watcher listens to process events. Between Begin and End it follows
// every process this program forks, and their descendants.
type Watcher struct {
	fd   int
	self int32

	closed atomic.Bool
	mu     sync.Mutex
	on     bool
	tree   map[int32]bool // processes below this program, started since Begin: alive
	counts Counts
	idle   *sync.Cond // signalled when the last process of the tree exits
	trees  []*Tree    // long-running trees followed beside a measurement
	done   chan struct{}
}

// Listen subscribes to the kernel's process events.
func Listen() (*Watcher, error) {
	// The Go runtime's first process start clones a throwaway child to
	// learn whether clone(CLONE_PIDFD) works; let that happen before the
	// first measurement so it is not counted as the measured command's.
	exec.Command("/bin/true").Run()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("process events: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: uint32(unix.Getpid())}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("process events: %w", err)
	}
	// A large receive buffer: a burst of hundreds of events must not be
	// dropped while the reader is scheduled out.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	// Closing a socket does not wake a blocked receive: the reader wakes
	// every 200 ms to see whether it should stop.
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	if err := send(fd, procCnMcastListen); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("process events: %w", err)
	}
	w := &Watcher{fd: fd, self: int32(unix.Getpid()), done: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	go w.read()
	return w, nil
}

// send writes one connector message with a 4-byte op.
func send(fd, op int) error {
	b := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))         // nlmsg_len
	ne.PutUint16(b[4:], unix.NLMSG_DONE)        // nlmsg_type
	ne.PutUint32(b[12:], uint32(unix.Getpid())) // nlmsg_pid
	ne.PutUint32(b[nlmsgHdrLen:], cnIdxProc)    // cb_id.idx
	ne.PutUint32(b[nlmsgHdrLen+4:], cnValProc)  // cb_id.val
	ne.PutUint16(b[nlmsgHdrLen+16:], 4)         // len
	ne.PutUint32(b[nlmsgHdrLen+cnMsgLen:], uint32(op))
	return unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// Begin starts a measurement: the processes this program forks from now
// on, and what they spawn. One measurement at a time; the program must
// start nothing else meanwhile.
func (w *Watcher) Begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on, w.tree, w.counts = true, map[int32]bool{}, Counts{}
}

// End returns what the measurement saw. The started commands must have
// exited: End waits (at most a second) until the exit event of every
// process of the tree has been read, so no exec or fork event of theirs is
// still in flight; a process left running is counted as far as it got.
func (w *Watcher) End() Counts {
	stop := time.AfterFunc(time.Second, func() {
		w.mu.Lock()
		w.on = false
		w.idle.Broadcast()
		w.mu.Unlock()
	})
	defer stop.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.on && (w.counts.Processes == 0 || w.alive() > 0) {
		w.idle.Wait()
	}
	w.on = false
	return w.counts
}

// alive counts the tree's processes that have not exited; mu held.
func (w *Watcher) alive() int {
	n := 0
	for _, a := range w.tree {
		if a {
			n++
		}
	}
	return n
}

// Close ends the subscription.
func (w *Watcher) Close() {
	send(w.fd, procCnMcastIgnore)
	w.closed.Store(true)
	<-w.done
	unix.Close(w.fd)
}

func (w *Watcher) read() {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	ne := binary.NativeEndian
	for {
		if w.closed.Load() {
			return
		}
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if err != nil {
			if err == unix.EINTR || err == unix.ENOBUFS || err == unix.EAGAIN {
				continue
			}
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			d := m.Data
			if len(d) < cnMsgLen+procEventHeaderLen+16 {
				continue
			}
			ev := d[cnMsgLen:]
			what := ne.Uint32(ev[0:])
			data := ev[procEventHeaderLen:]
			switch what {
			case procEventFork:
				// parent_pid, parent_tgid, child_pid, child_tgid
				ptgid, cpid, ctgid := int32(ne.Uint32(data[4:])), int32(ne.Uint32(data[8:])), int32(ne.Uint32(data[12:]))
				if cpid != ctgid {
					continue // a thread, not a process
				}
				w.mu.Lock()
				switch {
				case !w.on:
				case ptgid == w.self, w.tree[ptgid]:
					w.tree[ctgid] = true
					w.counts.Processes++
				}
				for _, t := range w.trees {
					t.fork(w.self, ptgid, ctgid)
				}
				w.mu.Unlock()
			case procEventExec:
				tgid := int32(ne.Uint32(data[4:]))
				w.mu.Lock()
				if w.on && w.tree[tgid] {
					w.counts.Execs++
				}
				for _, t := range w.trees {
					if t.alive[tgid] {
						t.counts.Execs++
					}
				}
				w.mu.Unlock()
			case procEventExit:
				pid, tgid := int32(ne.Uint32(data[0:])), int32(ne.Uint32(data[4:]))
				if pid != tgid {
					continue // a thread
				}
				w.mu.Lock()
				if w.on && w.tree[tgid] {
					w.tree[tgid] = false
					w.idle.Broadcast()
				}
				for _, t := range w.trees {
					delete(t.alive, tgid)
				}
				w.mu.Unlock()
			}
		}
	}
}

// Tree follows one long-running process tree (an autorate controller)
// while other measurements go on: its root is the next process this
// program forks after Adopt, and every process below it is counted.
type Tree struct {
	w      *Watcher
	root   int32
	alive  map[int32]bool
	counts Counts
	rooted chan struct{}
}

// Adopt makes the next process this program forks the root of a Tree.
// The caller starts that process next, and nothing else until Root
// returns.
func (w *Watcher) Adopt() *Tree {
	t := &Tree{w: w, alive: map[int32]bool{}, rooted: make(chan struct{})}
	w.mu.Lock()
	w.trees = append(w.trees, t)
	w.mu.Unlock()
	return t
}

// fork records a fork; mu held.
func (t *Tree) fork(self, parent, child int32) {
	switch {
	case t.root == 0 && parent == self:
		t.root = child
		t.alive[child] = true
		close(t.rooted)
	case t.root != 0 && t.alive[parent]:
		t.alive[child] = true
		t.counts.Processes++
	}
}

// Root waits (at most a second) for the adopted process and returns its
// pid, 0 if it never came.
func (t *Tree) Root() int32 {
	select {
	case <-t.rooted:
	case <-time.After(time.Second):
	}
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.root
}

// Pids are the tree's processes alive now.
func (t *Tree) Pids() []int32 {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	var p []int32
	for pid := range t.alive {
		p = append(p, pid)
	}
	return p
}

// Counts are the processes the root spawned (itself not counted) and the
// programs they ran.
func (t *Tree) Counts() Counts {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.counts
}

// Stop ends the following.
func (t *Tree) Stop() {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	for i, x := range t.w.trees {
		if x == t {
			t.w.trees = append(t.w.trees[:i], t.w.trees[i+1:]...)
			break
		}
	}
}
