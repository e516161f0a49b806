package sockopt

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHandshakeRTT: over loopback, the kernel's sample stands for a dial
// the process timed at a second (as a busy process would); a handshake
// whose SYN went again (a listener whose accept queue was full) keeps the
// dialer's time, which holds the path's wait; a connection that is not TCP
// keeps the dialer's time.
func TestHandshakeRTT(t *testing.T) {
	addr, accept := smallBacklog(t)
	clean, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer clean.Close()
	if got := HandshakeRTT(clean, time.Second); got <= 0 || got > 100*time.Millisecond {
		t.Errorf("clean handshake timed at 1s by the process: %v, want the kernel's sample (well under 100ms)", got)
	}

	// clean sits in the accept queue, which is now full: the next SYN is
	// dropped until the queue has room, and sent again after a second
	go func() { time.Sleep(300 * time.Millisecond); accept() }()
	start := time.Now()
	again, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	measured := time.Since(start)
	if measured < 500*time.Millisecond {
		t.Fatalf("the second dial took %v: its SYN was not dropped, the case is not made", measured)
	}
	if got := HandshakeRTT(again, measured); got != measured {
		t.Errorf("a SYN sent again: %v, want the dialer's %v", got, measured)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := HandshakeRTT(a, time.Second); got != time.Second {
		t.Errorf("not TCP: %v, want the dialer's 1s", got)
	}
}

// smallBacklog listens on loopback with an accept queue of one connection
// and returns its address and a func that accepts one.
func smallBacklog(t *testing.T) (string, func()) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	return addr, func() {
		if nfd, _, err := unix.Accept(fd); err == nil {
			t.Cleanup(func() { unix.Close(nfd) })
		}
	}
}
