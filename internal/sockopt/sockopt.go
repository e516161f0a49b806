// Package sockopt holds the socket options the bufferbloat test and
// autorate need so that latency is measured in the network, not in our own
// buffers or scheduling: a small TCP not-sent low-water mark, the
// acknowledged byte count, and the kernel's receive stamp on probes.
package sockopt

import "net"

// BulkLowat is the TCP_NOTSENT_LOWAT both ends of the bufferbloat test set
// on bulk senders. Without it the kernel lets megabytes of unsent data pile
// up in the socket (send buffer autotuning), and a pong written behind them
// measures the sender's own buffer instead of the network's queue. 16 KB
// keeps that self-inflicted delay to one frame plus 16 KB per stream while
// still letting a sender fill multi-gigabit paths.
const BulkLowat = 16 << 10

// TuneBulk sets BulkLowat on c (see SetNotSentLowat).
func TuneBulk(c net.Conn) { SetNotSentLowat(c, BulkLowat) }

// rawConn is what the options act on: a TCP connection's file descriptor.
func rawConn(c net.Conn) (interface{ Control(func(uintptr)) error }, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil, false
	}
	rc, err := tc.SyscallConn()
	return rc, err == nil
}
