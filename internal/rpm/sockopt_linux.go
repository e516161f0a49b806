package rpm

import (
	"net"

	"golang.org/x/sys/unix"
)

// bytesAcked is the number of bytes the peer acknowledged on c.
func bytesAcked(c net.Conn) (int64, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return 0, false
	}
	return int64(info.Bytes_acked), true
}
