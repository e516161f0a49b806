package autorate

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"github.com/sqmkit/sqmkit/internal/sockopt"
)

// stamped is a datagram socket the daemon's tick reads without waiting,
// each datagram with the time the kernel received it (SO_TIMESTAMPNS).
// The tick drains it once per probe instead of a reader goroutine blocked
// on it: on a router a wakeup, not the work done in it, is what costs
// (lab: 50 wakeups a second were most of autorate's CPU). The kernel's
// stamp keeps the delay exact however late the tick reads it.
//
// It is a plain descriptor, not a socket of the net package: those sit in
// the Go runtime's epoll set, where every datagram that arrives can wake
// the runtime's poller even when no goroutine waits for it. And the tick's
// calls on it are raw (rawsys.go).
type stamped struct {
	fd  int
	v6  bool
	buf []byte
	oob []byte
	// the kernel reads and writes these during a call: kept here, off
	// the stack and allocated once
	msg  syscall.Msghdr
	iov  syscall.Iovec
	from syscall.RawSockaddrAny
	to   syscall.RawSockaddrInet6 // or an Inet4 in its first bytes
}

// openStamped opens a non-blocking socket of family AF_INET (or AF_INET6
// when v6), type typ and protocol proto, bound to the wildcard address
// when bind (an unprivileged ping socket needs it; others bind on their
// first send).
func openStamped(v6 bool, typ, proto int, bind bool, size int) (*stamped, error) {
	family := syscall.AF_INET
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{}
	if v6 {
		family, sa = syscall.AF_INET6, &syscall.SockaddrInet6{}
	}
	fd, err := syscall.Socket(family, typ|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, err
	}
	if bind {
		err = syscall.Bind(fd, sa)
	}
	if err == nil {
		if err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
			err = fmt.Errorf("receive timestamps (SO_TIMESTAMPNS): %w", err)
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	s := &stamped{fd: fd, v6: v6, buf: make([]byte, size), oob: make([]byte, sockopt.RxStampSpace)}
	s.iov.Base = &s.buf[0]
	s.iov.SetLen(len(s.buf))
	s.msg.Name = (*byte)(unsafe.Pointer(&s.from))
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Control = &s.oob[0]
	return s, nil
}

func (s *stamped) close() error { return syscall.Close(s.fd) }

// send sends b to to without waiting: a full socket buffer, or no route
// (the WAN down), is a probe lost, which the controller sees as silence.
func (s *stamped) send(b []byte, to netip.AddrPort) error {
	a := to.Addr().Unmap()
	s.to = syscall.RawSockaddrInet6{}
	port := (*[2]byte)(unsafe.Pointer(&s.to.Port)) // network byte order
	port[0], port[1] = byte(to.Port()>>8), byte(to.Port())
	size := uintptr(syscall.SizeofSockaddrInet6)
	switch {
	case s.v6:
		s.to.Family, s.to.Addr = syscall.AF_INET6, a.As16()
	case a.Is4():
		// the same first bytes: family, port, then the address
		in4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(&s.to))
		in4.Family, in4.Addr, size = syscall.AF_INET, a.As4(), syscall.SizeofSockaddrInet4
	default:
		return fmt.Errorf("%v is not an IPv4 address", a)
	}
	return rawSendto(s.fd, b, unsafe.Pointer(&s.to), size)
}

// drain hands the datagrams waiting to fn, with their source address and
// the kernel's receive time (fallback when it gave none), while fn wants
// more and some are left. A source whose every probe is answered stops
// there: the read that would only say "nothing left" is a system call per
// tick saved.
func (s *stamped) drain(fallback time.Time, fn func(b []byte, from netip.Addr, at time.Time) (more bool)) {
	for {
		s.msg.Namelen = syscall.SizeofSockaddrAny
		s.msg.SetControllen(len(s.oob))
		n, err := rawRecvmsg(s.fd, &s.msg)
		if err != nil {
			return // EAGAIN: drained; anything else: the next tick tries again
		}
		var from netip.Addr
		switch s.from.Addr.Family {
		case syscall.AF_INET:
			from = netip.AddrFrom4((*syscall.RawSockaddrInet4)(unsafe.Pointer(&s.from)).Addr)
		case syscall.AF_INET6:
			from = netip.AddrFrom16((*syscall.RawSockaddrInet6)(unsafe.Pointer(&s.from)).Addr).Unmap()
		}
		if !fn(s.buf[:n], from, stampOr(s.oob[:s.msg.Controllen], fallback)) {
			return
		}
	}
}

// stampOr is the kernel's receive stamp in oob, else fallback.
func stampOr(oob []byte, fallback time.Time) time.Time {
	if t, ok := sockopt.RxStamp(oob); ok {
		return t
	}
	return fallback
}
