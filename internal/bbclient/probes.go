package bbclient

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// ProbeFlows is how many UDP flows (source ports) carry the probes, in
// turn. A flow-queueing qdisc hashes flows into a fixed set of queues
// (fq_codel: 1024), so one probe flow shares a bulk flow's queue in about
// one phase in a hundred and then reads that flow's queue instead of the
// sparse flows' latency; with several, the collided one stands apart
// (bbresult.Phase.CollidedFlow) and moves the phase's median little.
// flent's RRUL measures with several latency flows for the same reason.
const ProbeFlows = 4

// prober sends UDP probes at a fixed rate and matches the replies.
type prober struct {
	t     *tester
	conns []*net.UDPConn // probe seq goes out on conns[seq%len(conns)]
	slots int

	mu      sync.Mutex
	recs    []record // indexed by seq
	slowest int64    // ns
}

func newProber(t *tester, cs []*net.UDPConn, slots int) *prober {
	return &prober{t: t, conns: cs, slots: slots, recs: make([]record, 0, min(slots, 1<<16))}
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
		flow := int(seq) % len(p.conns)
		p.mu.Lock()
		p.recs = append(p.recs, record{seq: seq, sent: now, flow: flow})
		p.mu.Unlock()
		// A failed send (no route yet, buffer full) is a lost probe,
		// which is what it is on the path too.
		p.conns[flow].WriteToUDPAddrPort(buf, p.t.addr)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// receive matches the replies on c until it is closed.
func (p *prober) receive(c *net.UDPConn) {
	buf := make([]byte, bbproto.ProbeMaxSize+1)
	oob := make([]byte, sockopt.RxStampSpace)
	for {
		n, oobn, _, _, err := c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		// The reply arrived when the kernel stamped it: the time until this
		// read is the test's own wait for a CPU (on a loaded client, the
		// same goroutines that receive the bulk streams), not the network's.
		// The wait and the present come from one reading: a goroutine
		// paused between two reads would date the arrival early by the
		// pause (TestPauseBetweenReads).
		read := p.t.read()
		now := p.t.since(read)
		if at, ok := sockopt.RxStamp(oob[:oobn]); ok {
			now -= max(0, int64(read.Sub(at)))
		}
		pr, err := bbproto.ParseProbe(buf[:n])
		if err != nil || !pr.Reply || pr.Session != p.t.sess {
			continue
		}
		p.mu.Lock()
		if i := int(pr.Seq); i < len(p.recs) && !p.recs[i].replied() && p.recs[i].sent == pr.ClientSend-p.t.wall0 {
			r := &p.recs[i]
			r.recv, r.srvRecv, r.srvSend = now, pr.ServerRecv, pr.ServerSend
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
