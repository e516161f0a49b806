package bbserver

import (
	"bufio"
	"net"
	"net/netip"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// countEvery is how often the server tells an uploading client how many
// bytes arrived; the client's upload goodput samples are built from these.
const countEvery = 50 * time.Millisecond

// deadliner refreshes a connection's read or write deadline at most once a
// second, because setting it on every 16 KB frame costs more than the copy.
type deadliner struct {
	set   func(time.Time) error
	stall time.Duration
	limit time.Time
	next  time.Time
}

func (d *deadliner) refresh(now time.Time) {
	if now.Before(d.next) {
		return
	}
	d.next = now.Add(time.Second)
	t := now.Add(d.stall)
	if t.After(d.limit) {
		t = d.limit
	}
	d.set(t)
}

func tcpPeer(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// stream runs one data stream of a live session until the client closes it,
// the session ends, or the client stalls.
func (s *Server) stream(c net.Conn, h bbproto.StreamHeader) {
	ss := s.lookup(h.Session, tcpPeer(c))
	if ss == nil {
		s.cfg.Log.Printf("refused %s stream from %s: no live session %s for that address", h.Kind, c.RemoteAddr(), h.Session)
		return
	}
	// Twice the announced count: the client opens the next phase's streams
	// while the server may still be noticing the previous phase's closes.
	n := &ss.streams[h.Kind]
	if n.Add(1) > int32(2*ss.maxStreams) {
		n.Add(-1)
		s.cfg.Log.Printf("refused %s stream from %s: more than %d open", h.Kind, c.RemoteAddr(), 2*ss.maxStreams)
		return
	}
	defer n.Add(-1)
	if !ss.track(c) {
		return
	}
	defer ss.untrack(c)
	c.SetDeadline(time.Time{})
	if h.Kind == bbproto.Download {
		s.send(ss, c)
	} else {
		s.sink(ss, c)
	}
}

// send writes bulk frames until the stream ends. Pings arriving on the
// reverse direction are answered by a pong queued between two data frames,
// i.e. behind everything this stream already has in flight.
func (s *Server) send(ss *session, c net.Conn) {
	sockopt.TuneBulk(c)
	pongs := make(chan uint64, 4)
	go func() {
		defer c.Close() // wakes the writer when the client hangs up
		var hdr [bbproto.FrameHeaderSize]byte
		var p [8]byte
		c.SetReadDeadline(ss.deadline)
		for {
			t, _, err := bbproto.ReadFrameHeader(c, &hdr)
			if err != nil || t != bbproto.FramePing {
				return
			}
			v, err := bbproto.Read8(c, &p)
			if err != nil {
				return
			}
			select {
			case pongs <- v:
			default: // the client pings faster than the protocol allows: drop
			}
		}
	}()
	d := deadliner{set: c.SetWriteDeadline, stall: s.cfg.Stall, limit: ss.deadline}
	var pong [bbproto.FrameHeaderSize + 8]byte
	for {
		d.refresh(time.Now())
		select {
		case v := <-pongs:
			pong = bbproto.Frame8(bbproto.FramePong, v)
			if _, err := c.Write(pong[:]); err != nil {
				return
			}
		default:
		}
		n, err := c.Write(s.frame)
		if !ss.account(&ss.sent, n) || err != nil {
			return
		}
	}
}

// sink reads bulk frames, answers pings at once (the reverse direction is
// nearly idle) and reports the byte count every countEvery.
func (s *Server) sink(ss *session, c net.Conn) {
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [bbproto.FrameHeaderSize]byte
	var p [8]byte
	var total int64
	rd := deadliner{set: c.SetReadDeadline, stall: s.cfg.Stall, limit: ss.deadline}
	wd := deadliner{set: c.SetWriteDeadline, stall: s.cfg.Stall, limit: ss.deadline}
	lastCount := time.Now()
	// Declared once: a buffer handed to an interface's Write escapes, and
	// one allocation per frame would be the server's only garbage.
	var reply [bbproto.FrameHeaderSize + 8]byte
	for {
		now := time.Now()
		rd.refresh(now)
		t, n, err := bbproto.ReadFrameHeader(br, &hdr)
		if err != nil {
			return
		}
		switch t {
		case bbproto.FrameData:
			if _, err := br.Discard(n); err != nil {
				return
			}
			total += int64(n)
			if !ss.account(&ss.recv, n) {
				return
			}
			if now.Sub(lastCount) < countEvery {
				continue
			}
			lastCount = now
			reply = bbproto.Frame8(bbproto.FrameCount, uint64(total))
		case bbproto.FramePing:
			v, err := bbproto.Read8(br, &p)
			if err != nil {
				return
			}
			reply = bbproto.Frame8(bbproto.FramePong, v)
		default:
			s.cfg.Log.Printf("test %s: dropping upload stream from %s: frame type %d not allowed", ss.id, c.RemoteAddr(), t)
			return
		}
		wd.refresh(now)
		if _, err := c.Write(reply[:]); err != nil {
			return
		}
	}
}

// serveUDP answers probes of live sessions from the address that opened
// them, in place and at the request's size.
func (s *Server) serveUDP(pc *net.UDPConn) {
	buf := make([]byte, bbproto.ProbeMaxSize+1)
	oob := make([]byte, sockopt.RxStampSpace)
	// A probe's arrival is the kernel's stamp: a server busy sending bulk
	// streams reads it late, and that wait is the server's processing
	// time (which the client takes out of the round trip), not the
	// upload's one-way delay.
	sockopt.StampReceives(pc)
	for {
		n, oobn, _, from, err := pc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		recv := time.Now().UnixNano()
		if at, ok := sockopt.RxStamp(oob[:oobn]); ok {
			recv = min(recv, at.UnixNano())
		}
		p, err := bbproto.ParseProbe(buf[:n])
		if err != nil || p.Reply {
			continue
		}
		ss := s.lookup(p.Session, from.Addr().Unmap())
		if ss == nil {
			continue
		}
		ss.mark(p.Seq)
		bbproto.MakeReply(buf[:n], recv, time.Now().UnixNano())
		pc.WriteToUDPAddrPort(buf[:n], from)
	}
}

func (ss *session) mark(seq uint32) {
	ss.pmu.Lock()
	if i := int(seq / 8); i < len(ss.received) {
		ss.received[i] |= 1 << (seq % 8)
	}
	ss.pmu.Unlock()
}
