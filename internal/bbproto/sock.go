package bbproto

import (
	"net"

	"golang.org/x/sys/unix"
)

// NotSentLowat is the TCP_NOTSENT_LOWAT both ends set on bulk senders.
// Without it the kernel lets megabytes of unsent data pile up in the socket
// (send buffer autotuning), and a pong written behind them measures the
// sender's own buffer instead of the network's queue. 16 KB keeps that
// self-inflicted delay to one frame plus 16 KB per stream while still letting
// a sender fill multi-gigabit paths.
const NotSentLowat = 16 << 10

// TuneSender sets NotSentLowat on c, when c is a TCP connection on a kernel
// that knows the option; elsewhere it does nothing and in-flow latency
// includes the send buffer.
func TuneSender(c net.Conn) { SetNotSentLowat(c, NotSentLowat) }

// SetNotSentLowat sets TCP_NOTSENT_LOWAT to bytes on c. Failure only costs
// some self-inflicted latency, so it is ignored.
func SetNotSentLowat(c net.Conn, bytes int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, bytes)
	})
}
