package tctest

import (
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// LargestSent captures the IPv4 TCP packets ns sends on its device as its
// qdisc gets them (a veth takes GSO packets whole, so a capture sees their
// whole length) until the func it returns is called, which reports the
// most TCP payload one carried: at most OneSegment when every packet was
// one segment. Payload, not frame length: a write of one MSS that the
// kernel sends with a SACK block (12 bytes of options) makes a 1526-byte
// frame, still one segment's payload (a loaded CI's
// TestOneSegmentToResponsivenessServer saw it).
func LargestSent(t testing.TB, ns *Netns) func() int {
	t.Helper()
	fd := -1
	var err error
	ns.Do(t, func() { fd, err = capture(ns.Dev) })
	if err != nil {
		t.Fatalf("capture on %s: %v", ns.Dev, err)
	}
	largest := make(chan int, 1)
	var stopped atomic.Bool
	go func() {
		buf, most := make([]byte, 1<<17), 0
		for {
			// stopped, it reads what the socket still holds and ends: a
			// starved reader's packets are all still there (a busy host's
			// TestWriteSegments read none when the socket closed first)
			flags := 0
			if stopped.Load() {
				flags = unix.MSG_DONTWAIT
			}
			n, from, err := unix.Recvfrom(fd, buf, flags)
			if (err == unix.EAGAIN || err == unix.EINTR) && !stopped.Load() {
				continue // a quiet moment (a test's idle phase) or a signal, not the end
			}
			if err != nil {
				largest <- most
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				most = max(most, tcpPayload(buf[:n]))
			}
		}
	}()
	return func() int {
		stopped.Store(true)
		most := <-largest
		unix.Close(fd)
		return most
	}
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
	// a read wakes at least this often to see whether it was stopped, and
	// the socket holds a test's packets while its reader waits for a CPU
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	return fd, nil
}

// OneSegment is the most TCP payload one segment carries under the
// pairs' 1500-byte MTU: 1500 less 20 bytes of IPv4 and 20 of TCP header.
const OneSegment = 1460

// tcpPayload is the TCP payload of an Ethernet frame carrying IPv4, or 0.
func tcpPayload(f []byte) int {
	const eth = 14
	if len(f) < eth+20 || f[12] != 0x08 || f[13] != 0x00 || f[eth]>>4 != 4 || f[eth+9] != unix.IPPROTO_TCP {
		return 0
	}
	tcp := eth + int(f[eth]&0x0f)*4
	if len(f) < tcp+20 {
		return 0
	}
	return len(f) - tcp - int(f[tcp+12]>>4)*4
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
