package autorate

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/sqmkit/sqmkit/internal/connlimit"
)

// Reflectors measures round-trip time to several ICMP echo reflectors
// from one socket: each one in turn, so each sees one probe per
// Active×interval and the controller one sample per interval. A reflector
// that answers none of its last DeadAfter probes is replaced by the next
// spare in the list (and goes to its end). Only the echo itself is
// needed: no ICMP timestamps, which many carrier NATs (Starlink's) drop.
//
// A round trip cannot say which direction queued; the controller blames
// the loaded ones (Controller.Add).
type Reflectors struct {
	Addrs     []netip.Addr // the first Active are probed, the rest are spares
	Active    int
	DeadAfter int
	Log       func(string)

	replaced connlimit.Throttle // the log of replacements

	mu     sync.Mutex // Run opens and closes the socket, Probe uses it
	rx     *stamped
	unpriv bool
	v6     bool
	id     int
	seq    uint16 // the latest echo's
	acked  uint16 // the newest echo answered: older ones are answered or lost
	next   int
	active []netip.Addr
	spare  []netip.Addr
	missed map[netip.Addr]int
}

func (r *Reflectors) Name() string { return fmt.Sprintf("%d reflectors", len(r.Addrs)) }

// DefaultReflectors: anycast resolvers that answer echo and are near
// everyone (cake-autorate's users use the same).
var DefaultReflectors = []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4", "9.9.9.9", "9.9.9.10", "208.67.222.222", "208.67.220.220"}

func (r *Reflectors) log(format string, a ...any) {
	if r.Log != nil {
		r.Log(fmt.Sprintf(format, a...))
	}
}

// listen opens the ICMP socket: raw as root (a router), else the
// unprivileged ping socket Linux offers within net.ipv4.ping_group_range.
func listen(v6 bool) (rx *stamped, unpriv bool, err error) {
	proto := syscall.IPPROTO_ICMP
	if v6 {
		proto = syscall.IPPROTO_ICMPV6
	}
	if rx, err = openStamped(v6, syscall.SOCK_RAW, proto, false, 1500); err == nil {
		return rx, false, nil
	}
	rx, err2 := openStamped(v6, syscall.SOCK_DGRAM, proto, true, 1500)
	if err2 != nil {
		return nil, false, fmt.Errorf("ICMP socket: %v (raw), %v (unprivileged; allow it with sysctl net.ipv4.ping_group_range)", err, err2)
	}
	return rx, true, nil
}

// Run opens the socket and keeps it for Probe until ctx ends.
func (r *Reflectors) Run(ctx context.Context) error {
	if len(r.Addrs) == 0 {
		return fmt.Errorf("no reflectors")
	}
	v6 := r.Addrs[0].Is6()
	for _, a := range r.Addrs {
		if a.Is6() != v6 {
			return fmt.Errorf("reflectors mix IPv4 and IPv6 (%v, %v): use one family", r.Addrs[0], a)
		}
	}
	rx, unpriv, err := listen(v6)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.rx, r.unpriv, r.v6 = rx, unpriv, v6
	if r.Active <= 0 || r.Active > len(r.Addrs) {
		r.Active = min(4, len(r.Addrs))
	}
	if r.DeadAfter <= 0 {
		r.DeadAfter = 10
	}
	r.replaced.Every = time.Minute
	r.active, r.spare = append([]netip.Addr{}, r.Addrs[:r.Active]...), append([]netip.Addr{}, r.Addrs[r.Active:]...)
	r.missed = map[netip.Addr]int{}
	r.id = os.Getpid() & 0xffff
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rx.close()
	r.rx = nil
	return ctx.Err()
}

// Probe reads the echo replies that came back, then sends the next echo,
// to each active reflector in turn.
func (r *Reflectors) Probe(now time.Time, out []Raw) []Raw {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rx == nil {
		return out
	}
	typ := icmp.Type(ipv4.ICMPTypeEcho)
	if r.v6 {
		typ = ipv6.ICMPTypeEchoRequest
	}
	if r.acked != r.seq {
		r.rx.drain(now, func(b []byte, from netip.Addr, at time.Time) bool {
			if raw, ok := r.reply(b, from, at); ok {
				raw.At = now
				out = append(out, raw)
			}
			return r.acked != r.seq
		})
	}
	to := r.active[r.next%len(r.active)]
	r.next++
	r.missed[to]++
	if r.missed[to] > r.DeadAfter {
		r.replace(to)
	}
	r.seq++
	body := make([]byte, 8)
	binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
	m := icmp.Message{Type: typ, Body: &icmp.Echo{ID: r.id, Seq: int(r.seq), Data: body}}
	b, _ := m.Marshal(nil)
	r.rx.send(b, netip.AddrPortFrom(to, 0)) // a failed send (no route: WAN down) is a missed reply
	return out
}

// reply reads one datagram: an echo reply of ours is a sample (its delay;
// the caller stamps it), anything else (a raw socket sees every ICMP
// message) is not.
func (r *Reflectors) reply(b []byte, addr netip.Addr, at time.Time) (Raw, bool) {
	proto := 1
	if r.v6 {
		proto = 58
	}
	if !r.unpriv && !r.v6 {
		// a raw IPv4 socket hands over the IP header too
		if len(b) < 20 || len(b) < int(b[0]&0x0f)*4 {
			return Raw{}, false
		}
		b = b[int(b[0]&0x0f)*4:]
	}
	m, err := icmp.ParseMessage(proto, b)
	if err != nil {
		return Raw{}, false
	}
	e, ok := m.Body.(*icmp.Echo)
	// the unprivileged socket rewrites the ID to its port: any reply on it is ours
	if !ok || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) || (!r.unpriv && e.ID != r.id) || len(e.Data) < 8 {
		return Raw{}, false
	}
	if !addr.IsValid() {
		return Raw{}, false
	}
	r.missed[addr] = 0
	if seq := uint16(e.Seq); int16(seq-r.acked) > 0 {
		r.acked = seq
	}
	sent := int64(binary.BigEndian.Uint64(e.Data))
	return Raw{Path: addr.String(), Ms: float64(at.UnixNano()-sent) / 1e6, Both: true}, true
}

// replace puts a dead reflector at the end of the spares and takes the
// first spare in its place. Called with r.mu held.
func (r *Reflectors) replace(dead netip.Addr) {
	delete(r.missed, dead)
	if len(r.spare) == 0 {
		return // nothing to swap in; it stays, and may come back
	}
	for i, a := range r.active {
		if a == dead {
			r.active[i], r.spare = r.spare[0], append(r.spare[1:], dead)
			// With the WAN down every reflector rotates through: one line
			// a minute on a router's syslog, not two a second
			// (TestReflectorOutageLogsRarely).
			if l := r.replaced.Line(fmt.Sprintf("reflector %v answered none of its last %d probes: replaced by %v", dead, r.DeadAfter, r.active[i])); l != "" {
				r.log("%s", l)
			}
			return
		}
	}
}
