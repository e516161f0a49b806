package autorate

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbclient"
	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/config"
)

// Raw is one probe's delay before its path's baseline is taken off.
type Raw struct {
	At   time.Time
	Path string // the baseline it is measured against
	Ms   float64
	Both bool             // a round trip
	Dir  config.Direction // a one-way delay's direction
}

// Source sends a probe when the daemon's tick asks for one and hands back
// the delays of the replies that arrived since: one timer drives probes,
// replies and decisions alike (see stamped).
type Source interface {
	Name() string
	// Run does the source's work between probes (a server's sessions, a
	// socket's life) until ctx ends; an error ends the daemon.
	Run(ctx context.Context) error
	// Probe sends one probe and appends a sample for each reply that
	// arrived since the last call, its delay measured at the kernel's
	// receive time and the sample stamped now. It never waits.
	Probe(now time.Time, out []Raw) []Raw
}

// Server measures one-way delay per direction against `sqmkit serve`
// (bbproto's timestamped UDP probes): the server stamps when it received
// and sent each probe, so the upload and the download each get their own
// delay, through NAT and without any ICMP. The two hosts' clocks differ
// by an offset each direction's baseline absorbs.
//
// A server session lasts at most its MaxDuration; the next one opens as
// the current one ends (one handshake without samples), and the probe
// socket stays the same.
type Server struct {
	Addr    string // HOST[:PORT]
	Network string // "tcp", "tcp4", "tcp6"
	Token   string
	Log     func(string)
	// Session is how long each session is asked for (default 100 s, under
	// the server's default 120 s limit).
	Session time.Duration

	mu  sync.Mutex
	rx  *stamped // one socket for every session
	pkt []byte
	cur *serverSession // nil between sessions
}

// serverSession is the session Probe sends into.
type serverSession struct {
	id    bbproto.SessionID
	addr  netip.AddrPort
	seq   uint32 // the next probe's
	acked uint32 // one past the newest probe answered: older ones are answered or lost
	slots uint32
}

func (s *Server) Name() string { return "server " + s.Addr }

func (s *Server) log(msg string) {
	if s.Log != nil {
		s.Log(msg)
	}
}

// Run keeps a session open for Probe. A lost server (WAN down, a restart)
// is retried every few seconds, for ever: the controller sees the silence
// as a stall.
func (s *Server) Run(ctx context.Context) error {
	dur := s.Session
	if dur == 0 {
		dur = 100 * time.Second
	}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.rx != nil {
			s.rx.close()
			s.rx = nil
		}
	}()
	backoff := time.Second
	for ctx.Err() == nil {
		// probe slots for the fastest interval the daemon uses
		hello := bbproto.Hello{Version: bbproto.Version, Token: s.Token, Duration: int64(dur), ProbeInterval: int64(fastProbe)}
		ss, err := bbclient.Open(ctx, s.Addr, s.Network, hello)
		if err != nil {
			s.log("server: " + err.Error() + "; trying again")
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = time.Second
		if err := s.open(ss.Addr.Addr().Is6()); err != nil {
			ss.Ctl.Close()
			return err
		}
		// stop probing a little before the session's end (the server's
		// clock and ours), then open the next at once
		s.session(ctx, ss, dur-min(5*time.Second, dur/10))
		bbproto.WriteMsg(ss.Ctl, bbproto.MsgDone, bbproto.Done{})
		ss.Ctl.Close()
	}
	return ctx.Err()
}

// open makes the probe socket, once.
func (s *Server) open(v6 bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rx != nil {
		return nil
	}
	rx, err := openStamped(v6, syscall.SOCK_DGRAM, 0, false, bbproto.ProbeMaxSize+1)
	if err != nil {
		return fmt.Errorf("probe socket: %w", err)
	}
	s.rx, s.pkt = rx, make([]byte, bbproto.ProbeDefaultSize)
	return nil
}

// fastProbe is the fastest probe interval (sizes a session's probe slots).
const fastProbe = 50 * time.Millisecond

// session offers ss to Probe for up to d, or until the server ends it
// early (a restart).
func (s *Server) session(ctx context.Context, ss *bbclient.Session, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	go func() {
		bbproto.ReadMsg(ss.Ctl)
		cancel()
	}()
	s.mu.Lock()
	s.cur = &serverSession{id: ss.ID, addr: ss.Addr, slots: uint32(bbproto.Hello{Duration: int64(d), ProbeInterval: int64(fastProbe)}.ProbeSlots())}
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
}

// Probe reads the replies that came back, then sends the next probe.
func (s *Server) Probe(now time.Time, out []Raw) []Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rx == nil {
		return out
	}
	cur := s.cur
	if cur != nil && cur.acked < cur.seq {
		s.rx.drain(now, func(b []byte, _ netip.Addr, at time.Time) bool {
			p, err := bbproto.ParseProbe(b)
			if err != nil || !p.Reply || p.Session != cur.id {
				return true // a reply of an ended session, or not one of ours
			}
			out = append(out,
				Raw{At: now, Path: "server-up", Ms: float64(p.ServerRecv-p.ClientSend) / 1e6, Dir: config.Upload},
				Raw{At: now, Path: "server-down", Ms: float64(at.UnixNano()-p.ServerSend) / 1e6, Dir: config.Download})
			cur.acked = max(cur.acked, p.Seq+1)
			return cur.acked < cur.seq
		})
	}
	if cur != nil && cur.seq < cur.slots {
		p := bbproto.Probe{Session: cur.id, Seq: cur.seq, ClientSend: time.Now().UnixNano()}
		p.Marshal(s.pkt)
		s.rx.send(s.pkt, cur.addr) // a failed send is a missing reply
		cur.seq++
	}
	return out
}
