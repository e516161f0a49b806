package autorate

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbtest"
)

// Raw is one probe's delay before its path's baseline is taken off.
type Raw struct {
	At   time.Time
	Path string // the baseline it is measured against
	Ms   float64
	Both bool // a round trip
	Dir  Dir  // a one-way delay's direction
}

// Source sends probes and delivers their delays until ctx ends.
// Interval is read before every probe, so the daemon can slow it down
// while the link sleeps.
type Source interface {
	Run(ctx context.Context, interval *atomic.Int64, out chan<- Raw) error
	Name() string
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
}

func (s *Server) Name() string { return "server " + s.Addr }

func (s *Server) log(msg string) {
	if s.Log != nil {
		s.Log(msg)
	}
}

// Run keeps a session open and probes it. A lost server (WAN down, a
// restart) is retried every few seconds, for ever: the controller sees the
// silence as a stall.
func (s *Server) Run(ctx context.Context, interval *atomic.Int64, out chan<- Raw) error {
	dur := s.Session
	if dur == 0 {
		dur = 100 * time.Second
	}
	var udp *net.UDPConn
	defer func() {
		if udp != nil {
			udp.Close()
		}
	}()
	backoff := time.Second
	for ctx.Err() == nil {
		// probe slots for the fastest interval the daemon uses
		hello := bbproto.Hello{Version: bbproto.Version, Token: s.Token, Duration: int64(dur), ProbeInterval: int64(fastProbe)}
		ss, err := bbtest.Open(ctx, s.Addr, s.Network, hello)
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
		if udp == nil {
			network := "udp4"
			if ss.Addr.Addr().Is6() {
				network = "udp6"
			}
			if udp, err = net.ListenUDP(network, nil); err != nil {
				ss.Ctl.Close()
				return err
			}
		}
		// stop probing a little before the session's end (the server's
		// clock and ours), then open the next at once
		s.probe(ctx, ss, udp, dur-min(5*time.Second, dur/10), interval, out)
		bbproto.WriteMsg(ss.Ctl, bbproto.MsgDone, bbproto.Done{})
		ss.Ctl.Close()
	}
	return ctx.Err()
}

// fastProbe is the fastest probe interval (sizes a session's probe slots).
const fastProbe = 50 * time.Millisecond

// probe sends probes of one session for up to d and delivers the replies.
func (s *Server) probe(ctx context.Context, ss *bbtest.Session, udp *net.UDPConn, d time.Duration, interval *atomic.Int64, out chan<- Raw) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	// the server ending the session early (a restart) ends it here too
	go func() {
		bbproto.ReadMsg(ss.Ctl)
		cancel()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, bbproto.ProbeMaxSize+1)
		// no deadline per read (a timer reset per reply): the session's
		// end sets one in the past, which ends the read below
		udp.SetReadDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { udp.SetReadDeadline(time.Now()) })
		defer stop()
		for {
			n, _, err := udp.ReadFromUDPAddrPort(buf)
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if err != nil && (!errors.As(err, &ne) || !ne.Timeout()) {
				return
			}
			if err != nil {
				continue
			}
			now := time.Now()
			p, err := bbproto.ParseProbe(buf[:n])
			if err != nil || !p.Reply || p.Session != ss.ID {
				continue
			}
			up := float64(p.ServerRecv-p.ClientSend) / 1e6
			down := float64(now.UnixNano()-p.ServerSend) / 1e6
			for _, r := range []Raw{{At: now, Path: "server-up", Ms: up, Dir: Up}, {At: now, Path: "server-down", Ms: down, Dir: Down}} {
				select {
				case out <- r:
				default: // the daemon is behind: a lost sample, not a blocked prober
				}
			}
		}
	}()
	buf := make([]byte, bbproto.ProbeDefaultSize)
	slots := uint32(bbproto.Hello{Duration: int64(d), ProbeInterval: int64(fastProbe)}.ProbeSlots())
	tick := newPacer(interval)
	defer tick.stop()
	for seq := uint32(0); seq < slots && ctx.Err() == nil; seq++ {
		p := bbproto.Probe{Session: ss.ID, Seq: seq, ClientSend: time.Now().UnixNano()}
		p.Marshal(buf)
		udp.WriteToUDPAddrPort(buf, ss.Addr)
		tick.wait(ctx)
	}
	cancel()
	<-done
}

// pacer ticks at the interval the daemon sets, one timer for a source's
// life rather than one per probe.
type pacer struct {
	iv  *atomic.Int64
	cur time.Duration
	t   *time.Ticker
}

func newPacer(iv *atomic.Int64) *pacer {
	p := &pacer{iv: iv, cur: time.Duration(iv.Load())}
	p.t = time.NewTicker(p.cur)
	return p
}

func (p *pacer) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-p.t.C:
	}
	if d := time.Duration(p.iv.Load()); d != p.cur {
		p.cur = d
		p.t.Reset(d)
	}
}

func (p *pacer) stop() { p.t.Stop() }
