package sockopt

import (
	"io"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestWriteSegments sends from one namespace to another over a veth and
// captures the sender's outgoing packets as its qdisc gets them (a veth
// takes GSO packets whole, so a capture sees their whole length): written
// one segment per packet the largest is one MSS and its headers; written
// plainly the kernel's TSO sizing hands over many segments at once.
func TestWriteSegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  bool
	}{{"one segment", true}, {"plain", false}} {
		t.Run(tc.name, func(t *testing.T) {
			snd, rcv := tctest.NewPair(t, "seg", 78)
			most := largestSent(t, snd, rcv, tc.seg)
			// one segment: a 1500-byte MTU's frame, 1514 bytes
			if one := most <= 1514; one != tc.seg {
				t.Errorf("largest frame sent %d bytes: one segment %v, want %v", most, one, tc.seg)
			}
		})
	}
}

// largestSent sends 4 MB from namespace snd to rcv, one segment per
// packet when seg, and returns the largest frame sent on snd's device.
func largestSent(t *testing.T, snd, rcv *tctest.Netns, seg bool) int {
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
	var c net.Conn
	capFD := -1
	snd.Do(t, func() {
		var err error
		if capFD, err = capture(snd.Dev); err != nil {
			t.Errorf("capture on %s: %v", snd.Dev, err)
			return
		}
		if c, err = net.Dial("tcp4", ln.Addr().String()); err != nil {
			t.Errorf("dial: %v", err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	largest := make(chan int, 1)
	go func() {
		buf, most := make([]byte, 1<<17), 0
		for {
			n, from, err := unix.Recvfrom(capFD, buf, 0)
			if err != nil {
				largest <- most
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				most = max(most, n)
			}
		}
	}()
	buf := make([]byte, 64<<10)
	const total = 4 << 20
	for sent := 0; sent < total; sent += len(buf) {
		var err error
		if seg {
			var ok bool
			if ok, err = WriteSegments(c, buf); !ok {
				t.Fatal("WriteSegments did not take a TCP connection")
			}
		} else {
			_, err = c.Write(buf)
		}
		if err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	c.Close()
	if n := <-got; n != total {
		t.Fatalf("received %d bytes, want %d", n, total)
	}
	unix.Shutdown(capFD, unix.SHUT_RDWR)
	unix.Close(capFD)
	v := <-largest
	t.Logf("largest frame sent: %d bytes", v)
	return v
}

// capture opens a packet socket on dev, in the calling thread's namespace,
// whose reads fail once it is closed.
func capture(dev string) (int, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return -1, err
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	// a read that waits past the transfer ends with EAGAIN
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
