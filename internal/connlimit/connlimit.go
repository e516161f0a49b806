// Package connlimit holds what a server left on the internet needs to stay
// fair to many clients: slots capped in total and per client (an IPv4
// address or an IPv6 /64, which one subscriber holds), sliding-window
// counters per client, and a log throttle so a flood cannot flood the log.
package connlimit

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Key groups addresses the way one user holds them: an IPv4 address, or an
// IPv6 /64 (every subscriber gets at least a /64 to pick addresses from).
func Key(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// AddrOf is the client address of a connection (zero when unknown).
func AddrOf(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// Limiter caps slots held at once, in total and per client. When the total
// is reached, a newcomer displaces the oldest slot of the client that holds
// the most, if that client holds more than the newcomer's: a few addresses
// of idle sockets can then never lock everybody else out, and only a flood
// from as many clients as there are slots fills it.
type Limiter struct {
	Total, PerKey int
	// Reclaim: a client at its own cap gets a slot by displacing its own
	// oldest idle one (Slot.Idle), if it has one, rather than a refusal:
	// clients that leave connections open after use (goresponsiveness'
	// probes) then never lock themselves out of a new one
	// (TestReclaimIdle).
	Reclaim bool

	mu    sync.Mutex
	n     int
	slots map[netip.Prefix][]*Slot // oldest first
}

// Slot is one slot taken.
type Slot struct {
	l     *Limiter
	k     netip.Prefix
	evict func()
	freed bool
	idle  atomic.Bool
}

// Release gives the slot back; after an eviction it does nothing.
func (s *Slot) Release() {
	s.l.mu.Lock()
	s.l.free(s.k, s)
	s.l.mu.Unlock()
}

// Idle marks what holds the slot as idle (a connection between requests),
// which a Reclaim limiter may displace.
func (s *Slot) Idle(idle bool) { s.idle.Store(idle) }

// Full is the error of a Take beyond a cap.
type Full struct {
	Key      netip.Prefix
	PerKey   bool // the client's own cap, not the total
	Held     int
	Cap      int
	Resource string
}

func (e *Full) Error() string {
	if e.PerKey {
		return fmt.Sprintf("%s holds %d %s, the limit per client", e.Key, e.Held, e.Resource)
	}
	return fmt.Sprintf("%d %s held in total, the limit", e.Held, e.Resource)
}

// Take reserves a slot for a, or says which cap is reached; what names the
// slots in the error ("unidentified connections"). evict, when the slot is
// displaced by a newcomer, ends what holds it (closes the connection); the
// holder still calls release. evicted names the client displaced, if any.
func (l *Limiter) Take(a netip.Addr, what string, evict func()) (release func(), evicted netip.Prefix, err error) {
	s, evicted, err := l.TakeSlot(a, what, evict)
	if err != nil {
		return nil, evicted, err
	}
	return s.Release, evicted, nil
}

// TakeSlot is Take with the slot itself, for a holder that marks it idle.
func (l *Limiter) TakeSlot(a netip.Addr, what string, evict func()) (_ *Slot, evicted netip.Prefix, err error) {
	k := Key(a)
	l.mu.Lock()
	if l.slots == nil {
		l.slots = map[netip.Prefix][]*Slot{}
	}
	var victim *Slot
	if held := len(l.slots[k]); held >= l.PerKey {
		if i := l.idleSlot(k); l.Reclaim && i >= 0 {
			victim = l.slots[k][i]
			l.free(k, victim)
		} else {
			l.mu.Unlock()
			return nil, netip.Prefix{}, &Full{Key: k, PerKey: true, Held: held, Cap: l.PerKey, Resource: what}
		}
	}
	if victim == nil && l.n >= l.Total {
		var heavy netip.Prefix
		for key, ss := range l.slots {
			if len(ss) > len(l.slots[heavy]) || !heavy.IsValid() {
				heavy = key
			}
		}
		if len(l.slots[heavy]) <= len(l.slots[k])+1 {
			l.mu.Unlock()
			return nil, netip.Prefix{}, &Full{Key: k, Held: l.n, Cap: l.Total, Resource: what}
		}
		victim, evicted = l.slots[heavy][0], heavy
		l.free(heavy, victim)
	}
	s := &Slot{l: l, k: k, evict: evict}
	l.n++
	l.slots[k] = append(l.slots[k], s)
	l.mu.Unlock()
	if victim != nil && victim.evict != nil {
		victim.evict()
	}
	return s, evicted, nil
}

// idleSlot is the index of k's oldest idle slot, -1 when none is.
func (l *Limiter) idleSlot(k netip.Prefix) int {
	for i, s := range l.slots[k] {
		if s.idle.Load() {
			return i
		}
	}
	return -1
}

// free gives s back; the second call (release after an eviction) is a no-op.
func (l *Limiter) free(k netip.Prefix, s *Slot) {
	if s.freed {
		return
	}
	s.freed = true
	l.n--
	ss := l.slots[k]
	for i := range ss {
		if ss[i] == s {
			l.slots[k] = append(ss[:i:i], ss[i+1:]...)
			break
		}
	}
	if len(l.slots[k]) == 0 {
		delete(l.slots, k)
	}
}

// Held is the number of slots taken.
func (l *Limiter) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Window counts events per client over the last Span.
type Window struct {
	Span time.Duration

	mu sync.Mutex
	m  map[netip.Prefix][]time.Time
}

// Count returns how many events a's client had in the window ending now.
func (w *Window) Count(a netip.Addr, now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recent(Key(a), now))
}

// Add records an event of a's client at now and returns the count with it.
func (w *Window) Add(a netip.Addr, now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[netip.Prefix][]time.Time{}
	}
	k := Key(a)
	w.m[k] = append(w.recent(k, now), now)
	// forget clients with no recent events, so the map stays bounded by
	// the clients of one window
	for key, ts := range w.m {
		if now.Sub(ts[len(ts)-1]) >= w.Span {
			delete(w.m, key)
		}
	}
	return len(w.m[k])
}

func (w *Window) recent(k netip.Prefix, now time.Time) []time.Time {
	ts := w.m[k]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= w.Span {
		i++
	}
	return ts[i:]
}

// Throttle lets one log line through per Every; the next line that gets
// through says how many were held back.
type Throttle struct {
	Every time.Duration

	last       atomic.Int64 // unix nanoseconds
	suppressed atomic.Int64
}

// Line returns s to log, or "" when a line went out less than Every ago.
func (t *Throttle) Line(s string) string {
	now := time.Now().UnixNano()
	last := t.last.Load()
	if now-last < int64(t.Every) || !t.last.CompareAndSwap(last, now) {
		t.suppressed.Add(1)
		return ""
	}
	if n := t.suppressed.Swap(0); n > 0 {
		s += fmt.Sprintf(" (and %d more like it)", n)
	}
	return s
}
