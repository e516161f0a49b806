package autorate

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pollerFDs are the descriptors registered in any epoll set of this
// process (the Go runtime's poller among them), from /proc/self/fdinfo.
func pollerFDs(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[int]bool{}
	for _, e := range fds {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); l != "anon_inode:[eventpoll]" {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "tfd:" {
				n, _ := strconv.Atoi(f[1])
				out[n] = true
			}
		}
	}
	return out
}

// The probe socket stays out of the runtime's poller (a reply must not
// wake the process), and still reads each datagram with the kernel's
// receive time without waiting.
func TestStamped(t *testing.T) {
	// a socket of the net package, for contrast: it is in the poller
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.SyscallConn()
	var netFD int
	raw.Control(func(fd uintptr) { netFD = int(fd) })

	s, err := openStamped(false, syscall.SOCK_DGRAM, 0, true, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	in := pollerFDs(t)
	if !in[netFD] {
		t.Fatalf("the net package's socket %d is not in an epoll set %v: the check sees nothing", netFD, in)
	}
	if in[s.fd] {
		t.Errorf("the probe socket %d is in the runtime's epoll set: every reply wakes the process", s.fd)
	}

	sa, err := syscall.Getsockname(s.fd)
	if err != nil {
		t.Fatal(err)
	}
	self := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
	var got []string
	s.drain(time.Now(), func(b []byte, _ netip.Addr, _ time.Time) bool { got = append(got, string(b)); return true })
	if len(got) != 0 {
		t.Fatalf("an empty socket gave %q", got)
	}
	// The kernel turns receive stamping on for the first socket that asks
	// through a deferred static key; until then it stamps a datagram when
	// it is read. A daemon runs for hours; the test waits that moment out.
	time.Sleep(100 * time.Millisecond)
	sent := time.Now()
	for _, m := range []string{"one", "two"} {
		if err := s.send([]byte(m), self); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	late := time.Now()
	s.drain(late.Add(time.Hour), func(b []byte, from netip.Addr, at time.Time) bool {
		got = append(got, string(b))
		if from != self.Addr() {
			t.Errorf("%q from %v, want %v", b, from, self.Addr())
		}
		if at.Before(sent) || at.After(late) {
			t.Errorf("%q stamped %v, sent at %v and read at %v: not the kernel's receive time", b, at, sent, late)
		}
		return true
	})
	if strings.Join(got, ",") != "one,two" {
		t.Errorf("drained %q", got)
	}
	if err := s.send([]byte("x"), netip.MustParseAddrPort("[2001:db8::1]:1")); err == nil {
		t.Error("an IPv4 socket sent to an IPv6 address")
	}
}
