package bbclient

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// counts are the bytes each stream of a direction moved, cumulative over
// the test's phases (stream index i of every phase adds to counter i).
//
// While a stream runs, its count is what the kernel says its socket moved
// (TCP_INFO: bytes received on a download, bytes the server acknowledged
// on an upload), read at the moment of each sample: a test process, or a
// server, busy elsewhere for a moment then does not move the bytes of one
// sample into the next (the lab's emulated guest stalls for a few hundred
// ms now and then; per-second upload goodput read 5243, 9568, 6294, 9044
// kbit/s from the server's reports on an 8 Mbit/s line, and a line
// measurement whose window began on the catch-up read 6 % high). Where the
// kernel does not say (not Linux), the stream's own count stands: payload
// read, or confirmed by the server's reports.
type counts struct {
	app  []atomic.Int64
	mu   sync.Mutex
	live []*liveStream // the running stream of each index, or nil
}

type liveStream struct {
	c      net.Conn
	up     bool
	base   int64 // the index's count when the stream began
	kernel int64 // the socket's count then
}

func newCounts(n int) *counts {
	return &counts{app: make([]atomic.Int64, n), live: make([]*liveStream, n)}
}

// kernelCount is what c moved in its direction, by the kernel's count.
func kernelCount(c net.Conn, up bool) (int64, bool) {
	acked, received, ok := sockopt.TCPCounts(c)
	if up {
		return acked, ok
	}
	return received, ok
}

// track makes the kernel count stream i's bytes on c from now on; the
// counter it returns is where the stream counts for itself (kept only
// when the kernel cannot count). untrack ends it, keeping the count.
func (cs *counts) track(i int, c net.Conn, up bool) (own *atomic.Int64, untrack func()) {
	k, ok := kernelCount(c, up)
	if !ok {
		return &cs.app[i], func() {}
	}
	cs.mu.Lock()
	ls := &liveStream{c: c, up: up, base: cs.app[i].Load(), kernel: k}
	cs.live[i] = ls
	cs.mu.Unlock()
	return new(atomic.Int64), func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		cs.app[i].Store(ls.count())
		cs.live[i] = nil
	}
}

// count is the stream's index count now: its base and what the socket
// moved since; the base alone once the socket is gone.
func (ls *liveStream) count() int64 {
	k, ok := kernelCount(ls.c, ls.up)
	if !ok || k < ls.kernel {
		return ls.base
	}
	return ls.base + k - ls.kernel
}

// load returns every index's count now.
func (cs *counts) load() []int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	v := make([]int64, len(cs.app))
	for i := range cs.app {
		if ls := cs.live[i]; ls != nil {
			v[i] = ls.count()
		} else {
			v[i] = cs.app[i].Load()
		}
	}
	return v
}
