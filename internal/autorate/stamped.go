package autorate

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"
)

// stamped reads a datagram socket without waiting, each datagram with the
// time the kernel received it (SO_TIMESTAMPNS). The daemon drains its
// source's socket once per probe tick instead of keeping a reader
// goroutine blocked on it: every reply would otherwise be a wakeup of its
// own, and on a router a wakeup, not the work done in it, is what costs
// (lab: 50 wakeups a second were most of autorate's CPU). The kernel's
// stamp keeps the delay exact however late the tick reads it.
type stamped struct {
	rc  syscall.RawConn
	buf []byte
	oob []byte
}

func newStamped(c syscall.Conn, size int) (*stamped, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("receive timestamps (SO_TIMESTAMPNS): %w", serr)
	}
	return &stamped{rc: rc, buf: make([]byte, size), oob: make([]byte, syscall.CmsgSpace(16))}, nil
}

// drain hands the datagrams waiting to fn, with the kernel's receive time
// (fallback when it gave none), while fn wants more and some are left. A
// source whose every probe is answered stops there: the read that would
// only say "nothing left" is a system call per tick saved.
func (s *stamped) drain(fallback time.Time, fn func(b []byte, from syscall.Sockaddr, at time.Time) (more bool)) {
	s.rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, from, err := syscall.Recvmsg(int(fd), s.buf, s.oob, syscall.MSG_DONTWAIT)
			if err != nil {
				return true // EAGAIN: drained; anything else: the next tick tries again
			}
			if !fn(s.buf[:n], from, kernelTime(s.oob[:oobn], fallback)) {
				return true
			}
		}
	})
}

// kernelTime is the SCM_TIMESTAMPNS in a datagram's control messages: a
// timespec of two 64-bit words, or of two 32-bit words on the 32-bit
// routers (arm, mipsle), in the machine's byte order.
func kernelTime(oob []byte, fallback time.Time) time.Time {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return fallback
	}
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_TIMESTAMPNS {
			continue
		}
		switch len(m.Data) {
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:])))
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(m.Data))), int64(int32(binary.NativeEndian.Uint32(m.Data[4:]))))
		}
	}
	return fallback
}
