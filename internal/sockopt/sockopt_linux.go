package sockopt

import (
	"net"

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
	rc, ok := rawConn(c)
	if !ok {
		return 0, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, false
	}
	return int64(info.Bytes_acked), true
}
