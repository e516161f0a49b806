package bbclient

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// Each stream measures its own latency with one ping at a time, at most
// every pingEvery: often enough for percentiles over a 10 s phase, rare
// enough to be no load. A ping unanswered after pingTimeout is given up so
// a lost pong does not end the series.
const (
	pingEvery   = 100 * time.Millisecond
	pingTimeout = 2 * time.Second
)

// uploadFrame is the bulk frame every upload stream writes; shared and
// read-only, so streams cost no buffer memory of their own.
var uploadFrame = bbproto.DataFrame()

// stream runs data stream number i of its direction until ctx ends.
func (t *tester) stream(ctx context.Context, kind bbproto.StreamKind, i int) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", t.addr.String())
	if err != nil {
		if ctx.Err() == nil {
			t.fail(err)
		}
		return
	}
	cs := t.downS
	if kind == bbproto.Upload {
		cs = t.upS
	}
	own, untrack := cs.track(i, c, kind == bbproto.Upload)
	// the socket's last count is kept before it closes
	end := sync.OnceFunc(func() { untrack(); c.Close() })
	stop := context.AfterFunc(ctx, end)
	defer stop()
	defer end()
	h := bbproto.StreamHeader{Kind: kind, Session: t.sess}.Marshal()
	if _, err := c.Write(h[:]); err != nil {
		t.fail(err)
		return
	}
	if kind == bbproto.Download {
		err = t.download(ctx, c, own)
	} else {
		err = t.upload(ctx, c, own)
	}
	if err != nil && ctx.Err() == nil {
		t.fail(err)
	}
}

// download reads bulk frames and counts their payload; a pinger goroutine
// sends pings on the quiet reverse direction and the server queues each
// pong behind the bulk data already in flight.
func (t *tester) download(ctx context.Context, c net.Conn, own *atomic.Int64) error {
	pong := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			sent := time.Now()
			f := bbproto.Frame8(bbproto.FramePing, uint64(t.now()))
			if _, err := c.Write(f[:]); err != nil {
				return
			}
			select {
			case <-pong:
			case <-time.After(pingTimeout):
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(pingEvery - time.Since(sent)):
			case <-ctx.Done():
				return
			}
		}
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [bbproto.FrameHeaderSize]byte
	var p [8]byte
	for {
		typ, n, err := bbproto.ReadFrameHeader(br, &hdr)
		if err != nil {
			return err
		}
		switch typ {
		case bbproto.FrameData:
			m, err := br.Discard(n)
			own.Add(int64(m))
			if err != nil {
				return err
			}
		case bbproto.FramePong:
			v, err := bbproto.Read8(br, &p)
			if err != nil {
				return err
			}
			t.addInFlow("down", v)
			select {
			case pong <- struct{}{}:
			default:
			}
		default:
			return errors.New("server sent an unexpected frame on a download stream")
		}
	}
}

// upload writes bulk frames with a ping between two of them when one is
// due; a reader goroutine takes the server's pongs and byte counts.
func (t *tester) upload(ctx context.Context, c net.Conn, own *atomic.Int64) error {
	sockopt.TuneBulk(c)
	var waiting atomic.Bool // a ping is in flight
	var pingAt atomic.Int64 // t.now() of the last ping
	errc := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(c, 4<<10)
		var hdr [bbproto.FrameHeaderSize]byte
		var p [8]byte
		var last uint64
		for {
			typ, _, err := bbproto.ReadFrameHeader(br, &hdr)
			if err == nil && typ != bbproto.FramePong && typ != bbproto.FrameCount {
				err = errors.New("server sent an unexpected frame on an upload stream")
			}
			var v uint64
			if err == nil {
				v, err = bbproto.Read8(br, &p)
			}
			if err != nil {
				errc <- err
				c.Close()
				return
			}
			if typ == bbproto.FramePong {
				t.addInFlow("up", v)
				waiting.Store(false)
				continue
			}
			if v > last {
				own.Add(int64(v - last))
				last = v
			}
		}
	}()
	pingAt.Store(-int64(pingEvery))
	for {
		now := t.now()
		due := now-pingAt.Load() >= int64(pingEvery)
		if due && (!waiting.Load() || now-pingAt.Load() >= int64(pingTimeout)) {
			f := bbproto.Frame8(bbproto.FramePing, uint64(now))
			pingAt.Store(now)
			waiting.Store(true)
			if _, err := c.Write(f[:]); err != nil {
				return readerErr(errc, err)
			}
		}
		if err := t.writeUpload(c); err != nil {
			return readerErr(errc, err)
		}
	}
}

// writeUpload writes one bulk frame, one segment per packet when the
// test asks for it (Config.OneSegment) and the system can.
func (t *tester) writeUpload(c net.Conn) error {
	if t.cfg.OneSegment {
		if _, err := sockopt.WriteSegments(c, uploadFrame); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	_, err := c.Write(uploadFrame)
	return err
}

// readerErr prefers the reader's error: a write fails with "broken pipe"
// when the real cause was what the server said or did on the other side.
func readerErr(errc chan error, err error) error {
	select {
	case rerr := <-errc:
		return rerr
	case <-time.After(100 * time.Millisecond):
		return err
	}
}

// addInFlow records one in-flow round trip whose ping carried sentNs.
func (t *tester) addInFlow(dir string, sentNs uint64) {
	now := t.now()
	rtt := float64(now-int64(sentNs)) / 1e6
	t.mu.Lock()
	t.inflow = append(t.inflow, bbresult.InFlow{T: float64(sentNs) / 1e9, Dir: dir, RTT: rtt})
	t.mu.Unlock()
}
