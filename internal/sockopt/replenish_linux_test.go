package sockopt

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func TestReplenishLowat(t *testing.T) {
	for _, tc := range []struct {
		bytesPerSec float64
		want        int
	}{
		{0, 1500},                 // no rate yet: one segment
		{125_000, 1500},           // 1 Mbit/s: 625 B, under a segment
		{1_000_000, 5000},         // 8 Mbit/s
		{12_500_000, 62500},       // 100 Mbit/s: the draft's example
		{10_000_000_000, 4 << 20}, // 80 Gbit/s: the ceiling
	} {
		if got := replenishLowat(tc.bytesPerSec); got != tc.want {
			t.Errorf("replenishLowat(%.0f) = %d, want %d", tc.bytesPerSec, got, tc.want)
		}
	}
}

// TestReplenishFollowsRate sends through an 8 Mbit/s shaper on the
// sender's device and then over the plain veth: the mark settles near 5 ms
// of each (5 kB, then far more), where a fixed mark is one size for both.
func TestReplenishFollowsRate(t *testing.T) {
	snd, rcv := tctest.NewPair(t, "rpl", 79)
	var ln net.Listener
	rcv.Do(t, func() {
		var err error
		if ln, err = net.Listen("tcp", rcv.Addr+":0"); err != nil {
			t.Fatal(err)
		}
	})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	send := func() int {
		var c net.Conn
		snd.Do(t, func() {
			var err error
			if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
				t.Fatal(err)
			}
		})
		defer c.Close()
		r := Replenish(c)
		buf := make([]byte, 16<<10)
		// The mark is read once the connection has carried a second of the
		// shaped rate: under a loaded host the first flight's losses at the
		// tbf can stall it in retransmission timeouts, and a Write blocked
		// through them leaves the mark at its first estimate.
		start := time.Now()
		for {
			if _, err := r.Write(buf); err != nil {
				t.Fatal(err)
			}
			acked, _ := BytesAcked(c)
			if acked >= 1_000_000 && time.Since(start) >= 1500*time.Millisecond {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("only %d B acknowledged in %v", acked, time.Since(start))
			}
		}
		return lowatOf(t, c)
	}
	snd.Exec(t, "tc", "qdisc", "add", "dev", snd.Dev, "root", "tbf", "rate", "8mbit", "burst", "16k", "limit", "100000")
	shaped := send()
	snd.Exec(t, "tc", "qdisc", "del", "dev", snd.Dev, "root")
	plain := send()
	t.Logf("mark at 8 Mbit/s %d B, unshaped %d B", shaped, plain)
	if shaped < 2500 || shaped > 10000 {
		t.Errorf("mark at 8 Mbit/s is %d B, want about 5 ms of it (5000 B)", shaped)
	}
	if plain < 10*shaped {
		t.Errorf("mark unshaped is %d B, want at least ten times the shaped %d B", plain, shaped)
	}
}

func lowatOf(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, _ := rawConn(c)
	var v int
	var err error
	rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT) })
	if err != nil {
		t.Fatal(err)
	}
	return v
}
