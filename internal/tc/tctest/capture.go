package tctest

import (
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// LargestSent captures the frames ns sends on its device as its qdisc gets
// them (a veth takes GSO packets whole, so a capture sees their whole
// length) until the func it returns is called, which reports the largest:
// 1514 bytes when every packet was one segment under a 1500-byte MTU.
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
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if (err == unix.EAGAIN || err == unix.EINTR) && !stopped.Load() {
				continue // a quiet moment (a test's idle phase) or a signal, not the end
			}
			if err != nil {
				largest <- most
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				most = max(most, n)
			}
		}
	}()
	return func() int {
		stopped.Store(true)
		unix.Shutdown(fd, unix.SHUT_RDWR)
		unix.Close(fd)
		return <-largest
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
	// a read wakes at least this often to see whether it was stopped
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
