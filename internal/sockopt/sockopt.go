// Package sockopt holds the socket options the bufferbloat test and
// autorate need so that latency is measured in the network, not in our own
// buffers or scheduling: a small TCP not-sent low-water mark (fixed, or
// following the connection's rate), the acknowledged byte count, and the
// kernel's receive stamp on probes.
package sockopt

import (
	"net"
	"time"
)

// BulkLowat is the TCP_NOTSENT_LOWAT both ends of the bufferbloat test set
// on bulk senders. Without it the kernel lets megabytes of unsent data pile
// up in the socket (send buffer autotuning), and a pong written behind them
// measures the sender's own buffer instead of the network's queue. 16 KB
// keeps that self-inflicted delay to one frame plus 16 KB per stream while
// still letting a sender fill multi-gigabit paths.
const BulkLowat = 16 << 10

// TuneBulk sets BulkLowat on c (see SetNotSentLowat).
func TuneBulk(c net.Conn) { SetNotSentLowat(c, BulkLowat) }

// ReplenishTime is how much of a connection's throughput Replenish lets
// wait unsent in its socket: the 5 ms the responsiveness draft asks of test
// clients and servers (its TCP_REPLENISH_TIME, emulated with
// TCP_NOTSENT_LOWAT where the kernel lacks it).
const ReplenishTime = 5 * time.Millisecond

// replenishLowat is the mark for a connection sending bytesPerSec: its
// ReplenishTime's worth, at least one full segment (less would hold back
// what the kernel could send in one packet) and at most 4 MB (the kernel's
// usual send buffer ceiling).
func replenishLowat(bytesPerSec float64) int {
	return int(max(1500, min(4<<20, bytesPerSec*ReplenishTime.Seconds())))
}
