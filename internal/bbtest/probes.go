package bbtest

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
)

// prober sends UDP probes at a fixed rate and matches the replies.
type prober struct {
	t     *tester
	conn  *net.UDPConn
	slots int

	mu      sync.Mutex
	recs    []record // indexed by seq
	maxSeen int64    // highest seq replied so far, -1 before the first
	slowest int64    // ns
}

func newProber(t *tester, c *net.UDPConn, slots int) *prober {
	return &prober{t: t, conn: c, slots: slots, recs: make([]record, 0, min(slots, 1<<16)), maxSeen: -1}
}

// send probes every interval until ctx ends. Sending on a fixed schedule
// (not after each reply) keeps the probe load independent of the latency
// it measures, as irtt does.
func (p *prober) send(ctx context.Context) {
	buf := make([]byte, bbproto.ProbeDefaultSize)
	tick := time.NewTicker(p.t.cfg.ProbeInterval)
	defer tick.Stop()
	for seq := uint32(0); int(seq) < p.slots; seq++ {
		pr := bbproto.Probe{Session: p.t.sess, Seq: seq}
		now := p.t.now()
		pr.ClientSend = p.t.wall0 + now
		pr.Marshal(buf)
		p.mu.Lock()
		p.recs = append(p.recs, record{seq: seq, sent: now})
		p.mu.Unlock()
		// A failed send (no route yet, buffer full) is a lost probe,
		// which is what it is on the path too.
		p.conn.WriteToUDPAddrPort(buf, p.t.addr)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// receive matches replies until the socket is closed.
func (p *prober) receive() {
	buf := make([]byte, bbproto.ProbeMaxSize+1)
	for {
		n, _, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		now := p.t.now()
		pr, err := bbproto.ParseProbe(buf[:n])
		if err != nil || !pr.Reply || pr.Session != p.t.sess {
			continue
		}
		p.mu.Lock()
		if i := int(pr.Seq); i < len(p.recs) && !p.recs[i].replied() && p.recs[i].sent == pr.ClientSend-p.t.wall0 {
			r := &p.recs[i]
			r.recv, r.srvRecv, r.srvSend = now, pr.ServerRecv, pr.ServerSend
			r.reordered = int64(pr.Seq) < p.maxSeen
			p.maxSeen = max(p.maxSeen, int64(pr.Seq))
			p.slowest = max(p.slowest, now-r.sent)
		}
		p.mu.Unlock()
	}
}

func (p *prober) maxRTT() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.slowest)
}

// recent returns the RTTs (ms) of replies that arrived in the last d. By
// arrival, not by sending: on a link with seconds of queue, probes sent in
// the last quarter second have not come back yet.
func (p *prober) recent(d time.Duration) []float64 {
	since := p.t.now() - int64(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	var v []float64
	for i := len(p.recs) - 1; i >= 0 && p.recs[i].sent >= since-p.slowest; i-- {
		if r := p.recs[i]; r.replied() && r.recv >= since {
			v = append(v, r.rtt())
		}
	}
	return v
}

func (p *prober) records() []record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recs)
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
