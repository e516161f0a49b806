package sockopt

import (
	"encoding/binary"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SetNotSentLowat sets TCP_NOTSENT_LOWAT to bytes on c, when c is a TCP
// connection. Failure only costs some self-inflicted latency, so it is
// ignored.
func SetNotSentLowat(c net.Conn, bytes int) {
	if rc, ok := rawConn(c); ok {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, bytes)
		})
	}
}

// BytesAcked is the number of bytes the peer acknowledged on c (TCP_INFO).
func BytesAcked(c net.Conn) (int64, bool) {
	acked, _, ok := TCPCounts(c)
	return acked, ok
}

// TCPCounts are the bytes the peer acknowledged and the bytes received on
// c, as the kernel counts them (TCP_INFO): when they moved, however late
// the process reads or learns of them.
func TCPCounts(c net.Conn) (acked, received int64, ok bool) {
	rc, ok := rawConn(c)
	if !ok {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, 0, false
	}
	return int64(info.Bytes_acked), int64(info.Bytes_received), true
}

// RxStampSpace is the control-message buffer a read needs for RxStamp.
var RxStampSpace = syscall.CmsgSpace(16)

// StampReceives asks the kernel to stamp every datagram c receives with
// the time it arrived (SO_TIMESTAMPNS), which ReadStamped returns. A probe
// read by a busy process then still carries the network's delay, not the
// process's wait for a CPU (ping and irtt stamp the same way).
func StampReceives(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// RxStamp is the kernel's receive time in a datagram's control messages
// (SCM_TIMESTAMPNS): a timespec of two 64-bit words, or of two 32-bit
// words on the 32-bit routers (arm, mipsle), in the machine's byte order.
func RxStamp(oob []byte) (time.Time, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_TIMESTAMPNS {
			continue
		}
		switch len(m.Data) {
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:]))), true
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(m.Data))), int64(int32(binary.NativeEndian.Uint32(m.Data[4:])))), true
		}
	}
	return time.Time{}, false
}

// WriteSegments writes b to c one TCP segment per packet: each sendmsg
// carries at most one MSS and ends its record (MSG_EOR), so the kernel
// neither appends the next write to it nor sends it with another as one
// GSO packet. A host's own TCP otherwise hands its qdisc two segments at
// once on a slow line (its smallest TSO size), which a shaper with a
// two-packet burst lets out back to back, where a router forwards its
// clients' packets one by one. It reports false, having written nothing,
// when c is not a TCP connection.
func WriteSegments(c net.Conn, b []byte) (bool, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false, err
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		mss, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
		if err != nil || mss <= 0 {
			werr = err
			return true
		}
		for len(b) > 0 {
			n, err := unix.SendmsgN(int(fd), b[:min(mss, len(b))], nil, nil, unix.MSG_EOR|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
			if err == unix.EAGAIN {
				return false
			}
			if err != nil {
				werr = err
				return true
			}
			b = b[n:]
		}
		return true
	}); err != nil {
		return true, err
	}
	return true, werr
}
