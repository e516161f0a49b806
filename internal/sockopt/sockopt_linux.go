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
