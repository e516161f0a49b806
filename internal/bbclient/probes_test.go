package bbclient

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// TestRecentByArrival: the live RTT shows replies that arrived in the last
// window, however long ago their probe left; a probe sent in the window but
// not back yet, or a reply that came earlier, does not count. Selecting by
// send time instead showed the last loaded RTTs well into the idle phase.
func TestRecentByArrival(t *testing.T) {
	s := int64(time.Second)
	tr := &tester{start: time.Now().Add(-10 * time.Second)}
	p := newProber(tr, nil, 8)
	p.recs = []record{
		{seq: 0, sent: 5 * s, recv: 5*s + s/10},   // came back long ago
		{seq: 1, sent: 7 * s, recv: 9*s + 9*s/10}, // slow: 2.9 s, just arrived
		{seq: 2, sent: 9*s + 8*s/10, recv: 9*s + 8*s/10 + s/1000},
		{seq: 3, sent: 9*s + 9*s/10}, // in flight
	}
	p.slowest = 29 * s / 10
	got := p.recent(time.Second / 2)
	slices.Sort(got)
	want := []float64{1, 2900}
	if !slices.Equal(got, want) {
		t.Errorf("recent RTTs %v, want %v", got, want)
	}
}

// TestReplyStampedOnArrival: a reply that waits in the socket while the
// test is busy (here: not reading for 80 ms) is recorded when the kernel
// received it, not when the test read it. Without the kernel's stamp a
// loaded client's scheduling delay reads as download latency.
func TestReplyStampedOnArrival(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := sockopt.StampReceives(c); err != nil {
		t.Fatal(err)
	}
	tr := &tester{start: time.Now()}
	tr.wall0 = tr.start.UnixNano()
	p := newProber(tr, []*net.UDPConn{c}, 1)
	sent := tr.now()
	p.recs = []record{{seq: 0, sent: sent}}
	b := make([]byte, bbproto.ProbeDefaultSize)
	pr := bbproto.Probe{Reply: true, Seq: 0, ClientSend: tr.wall0 + sent, ServerRecv: 1, ServerSend: 1}
	pr.Marshal(b)
	peer, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write(b); err != nil {
		t.Fatal(err)
	}
	arrived := tr.now()
	time.Sleep(80 * time.Millisecond) // the reply waits in the socket
	read := tr.now()                  // the receiver reads it after this
	go p.receive(c)
	deadline := time.Now().Add(5 * time.Second)
	for !p.records()[0].replied() {
		if time.Now().After(deadline) {
			t.Fatal("the reply was not matched")
		}
		time.Sleep(time.Millisecond)
	}
	// the kernel stamped it before the receiver could read it, however late
	// a loaded host ran either (the sleep's 80 ms are the margin)
	if recv := p.records()[0].recv; recv >= read {
		t.Errorf("reply recorded %v after it arrived, at or after its read (%v): want its arrival (kernel stamp)", time.Duration(recv-arrived), time.Duration(read-arrived))
	}
}

// TestPauseBetweenReads: the receiver takes its clock reading, then the
// scheduler pauses it for 20 ms (a busy client). The arrival is the
// kernel's stamp and the lag behind it is measured from the same reading,
// so the pause moves nothing; measured with a second, later reading (as
// time.Since did) the reply dated 20 ms early and its RTT read about
// −20 ms on loopback.
func TestPauseBetweenReads(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := sockopt.StampReceives(c); err != nil {
		t.Fatal(err)
	}
	const pause = 20 * time.Millisecond
	tr := &tester{start: time.Now(), clock: func() time.Time {
		n := time.Now()
		time.Sleep(pause) // preempted right after reading the clock
		return n
	}}
	tr.wall0 = tr.start.UnixNano()
	p := newProber(tr, []*net.UDPConn{c}, 1)
	sent := int64(time.Since(tr.start))
	p.recs = []record{{seq: 0, sent: sent}}
	b := make([]byte, bbproto.ProbeDefaultSize)
	pr := bbproto.Probe{Reply: true, Seq: 0, ClientSend: tr.wall0 + sent, ServerRecv: 1, ServerSend: 1}
	pr.Marshal(b)
	peer, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go p.receive(c)
	if _, err := peer.Write(b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.records()[0].replied() {
		if time.Now().After(deadline) {
			t.Fatal("the reply was not matched")
		}
		time.Sleep(time.Millisecond)
	}
	r := p.records()[0]
	if d := time.Duration(r.recv - r.sent); d < 0 || d > pause/2 {
		t.Errorf("loopback round trip read %v with a %v pause between reads; want 0 to %v", d, pause, pause/2)
	}
}
