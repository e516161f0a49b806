package autorate

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
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

	mu     sync.Mutex
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
func listen(v6 bool) (*icmp.PacketConn, bool, error) {
	raw, unpriv, addr := "ip4:icmp", "udp4", "0.0.0.0"
	if v6 {
		raw, unpriv, addr = "ip6:ipv6-icmp", "udp6", "::"
	}
	c, err := icmp.ListenPacket(raw, addr)
	if err == nil {
		return c, false, nil
	}
	c, err2 := icmp.ListenPacket(unpriv, addr)
	if err2 != nil {
		return nil, false, fmt.Errorf("ICMP socket: %v (raw), %v (unprivileged; allow it with sysctl net.ipv4.ping_group_range)", err, err2)
	}
	return c, true, nil
}

// Run probes until ctx ends.
func (r *Reflectors) Run(ctx context.Context, interval *atomic.Int64, out chan<- Raw) error {
	if len(r.Addrs) == 0 {
		return fmt.Errorf("no reflectors")
	}
	if r.Active <= 0 || r.Active > len(r.Addrs) {
		r.Active = min(4, len(r.Addrs))
	}
	if r.DeadAfter <= 0 {
		r.DeadAfter = 10
	}
	v6 := r.Addrs[0].Is6()
	for _, a := range r.Addrs {
		if a.Is6() != v6 {
			return fmt.Errorf("reflectors mix IPv4 and IPv6 (%v, %v): use one family", r.Addrs[0], a)
		}
	}
	c, unpriv, err := listen(v6)
	if err != nil {
		return err
	}
	defer c.Close()
	r.active, r.spare = append([]netip.Addr{}, r.Addrs[:r.Active]...), append([]netip.Addr{}, r.Addrs[r.Active:]...)
	r.missed = map[netip.Addr]int{}
	id := os.Getpid() & 0xffff
	proto, typ := 1, icmp.Type(ipv4.ICMPTypeEcho)
	if v6 {
		proto, typ = 58, ipv6.ICMPTypeEchoRequest
	}
	go r.receive(ctx, c, proto, id, unpriv, out)
	var seq uint16
	tick := newPacer(interval)
	defer tick.stop()
	for i := 0; ctx.Err() == nil; i++ {
		r.mu.Lock()
		to := r.active[i%len(r.active)]
		r.missed[to]++
		if r.missed[to] > r.DeadAfter {
			r.replace(to)
		}
		r.mu.Unlock()
		seq++
		body := make([]byte, 8)
		binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
		m := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: int(seq), Data: body}}
		b, _ := m.Marshal(nil)
		var dst net.Addr = &net.IPAddr{IP: to.AsSlice()}
		if unpriv {
			dst = &net.UDPAddr{IP: to.AsSlice()}
		}
		c.WriteTo(b, dst) // a failed send (no route: WAN down) is a missed reply
		tick.wait(ctx)
	}
	return ctx.Err()
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
			r.log("reflector %v answered none of its last %d probes: replaced by %v", dead, r.DeadAfter, r.active[i])
			return
		}
	}
}

// receive delivers the replies' round-trip times.
func (r *Reflectors) receive(ctx context.Context, c *icmp.PacketConn, proto, id int, unpriv bool, out chan<- Raw) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			continue
		}
		now := time.Now()
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		// the unprivileged socket rewrites the ID to its port: any reply on it is ours
		if !ok || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) || (!unpriv && e.ID != id) || len(e.Data) < 8 {
			continue
		}
		var ip net.IP
		switch a := from.(type) {
		case *net.IPAddr:
			ip = a.IP
		case *net.UDPAddr:
			ip = a.IP
		}
		addr, _ := netip.AddrFromSlice(ip)
		addr = addr.Unmap()
		sent := int64(binary.BigEndian.Uint64(e.Data))
		r.mu.Lock()
		r.missed[addr] = 0
		r.mu.Unlock()
		select {
		case out <- Raw{At: now, Path: addr.String(), Ms: float64(now.UnixNano()-sent) / 1e6, Both: true}:
		default:
		}
	}
}
