//go:build !linux

package sockopt

import (
	"errors"
	"net"
	"time"
)

// SetNotSentLowat needs Linux; elsewhere in-flow latency includes the
// send buffer.
func SetNotSentLowat(net.Conn, int) {}

// Replenish needs Linux's TCP_NOTSENT_LOWAT and TCP_INFO; elsewhere c is
// returned as it is.
func Replenish(c net.Conn) net.Conn { return c }

// Unsent: no mark outside Linux (Replenish).
func Unsent(net.Conn) (int, bool) { return 0, false }

// BytesAcked needs Linux's TCP_INFO; elsewhere callers count body bytes.
func BytesAcked(net.Conn) (int64, bool) { return 0, false }

// TCPCounts needs Linux's TCP_INFO; elsewhere callers count what they read.
func TCPCounts(net.Conn) (acked, received int64, ok bool) { return 0, 0, false }

// HandshakeRTT needs Linux's TCP_INFO; elsewhere the dialer's own time
// stands.
func HandshakeRTT(_ net.Conn, measured time.Duration) time.Duration { return measured }

// RxStampSpace: no receive stamps outside Linux.
const RxStampSpace = 0

// StampReceives needs Linux; elsewhere a probe's arrival is when the
// process read it.
func StampReceives(*net.UDPConn) error { return nil }

// RxStamp: none outside Linux.
func RxStamp([]byte) (time.Time, bool) { return time.Time{}, false }

// Segmented needs Linux (WriteSegments); elsewhere c is returned as it is.
func Segmented(c net.Conn) net.Conn { return c }

// WriteSegments needs Linux (MSG_EOR on TCP); elsewhere it writes nothing
// and returns errors.ErrUnsupported.
func WriteSegments(net.Conn, []byte) (int, error) { return 0, errors.ErrUnsupported }
