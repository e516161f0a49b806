package sockopt

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestWriteSegments sends from one namespace to another over a veth and
// captures the sender's outgoing packets as its qdisc gets them (a veth
// takes GSO packets whole, so a capture sees their whole length): written
// one segment per packet none carries more than one MSS; written
// plainly the kernel's TSO sizing hands over many segments at once. So do
// the writes of a connection from Segmented, also one from Replenish, as
// TLS above it makes them.
func TestWriteSegments(t *testing.T) {
	segments := func(c net.Conn, b []byte) error {
		n, err := WriteSegments(c, b)
		if err == nil && n != len(b) {
			return fmt.Errorf("WriteSegments wrote %d of %d bytes", n, len(b))
		}
		return err
	}
	plain := func(c net.Conn, b []byte) error { _, err := c.Write(b); return err }
	wrapped := func(wrap func(net.Conn) net.Conn) func(net.Conn, []byte) error {
		var w net.Conn
		return func(c net.Conn, b []byte) error {
			if w == nil {
				w = wrap(c)
			}
			_, err := w.Write(b)
			return err
		}
	}
	for _, tc := range []struct {
		name  string
		write func(net.Conn, []byte) error
		seg   bool
	}{
		{"one segment", segments, true},
		{"plain", plain, false},
		{"Segmented", wrapped(Segmented), true},
		{"Segmented, from Replenish", wrapped(func(c net.Conn) net.Conn { return Segmented(Replenish(c)) }), true},
		{"Replenish", wrapped(Replenish), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd, rcv := tctest.NewPair(t, "seg", 78)
			most := largestSent(t, snd, rcv, tc.write)
			if one := most <= tctest.OneSegment; one != tc.seg {
				t.Errorf("most payload in one packet %d bytes: one segment %v, want %v", most, one, tc.seg)
			}
		})
	}
}

// TestWriteSegmentsNotTCP: a connection that is not TCP is refused with
// errors.ErrUnsupported and nothing written, so a caller writes it plainly.
func TestWriteSegmentsNotTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if n, err := WriteSegments(a, []byte("x")); n != 0 || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WriteSegments on a pipe: %d, %v; want 0, errors.ErrUnsupported", n, err)
	}
}

// largestSent sends 4 MB from namespace snd to rcv with write and returns
// the largest frame sent on snd's device.
func largestSent(t *testing.T, snd, rcv *tctest.Netns, write func(net.Conn, []byte) error) int {
	t.Helper()
	var ln net.Listener
	rcv.Do(t, func() {
		var err error
		if ln, err = net.Listen("tcp4", rcv.Addr+":0"); err != nil {
			t.Errorf("listen: %v", err)
		}
	})
	if ln == nil {
		t.FailNow()
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	largest := tctest.LargestSent(t, snd)
	var c net.Conn
	snd.Do(t, func() {
		var err error
		if c, err = net.Dial("tcp4", ln.Addr().String()); err != nil {
			t.Errorf("dial: %v", err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	buf := make([]byte, 64<<10)
	const total = 4 << 20
	for sent := 0; sent < total; sent += len(buf) {
		if err := write(c, buf); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	c.Close()
	if n := <-got; n != total {
		t.Fatalf("received %d bytes, want %d", n, total)
	}
	v := largest()
	t.Logf("most payload in one packet: %d bytes", v)
	return v
}
