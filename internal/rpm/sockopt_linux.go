package rpm

import (
	"net"

	"golang.org/x/sys/unix"
)

// setNotSentLowat limits the unsent data the kernel holds for c (see
// notSentLowat). Failure only costs some self-probe latency, so it is ignored.
func setNotSentLowat(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat)
	})
}
