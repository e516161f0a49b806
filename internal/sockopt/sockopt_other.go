//go:build !linux

package sockopt

import "net"

// SetNotSentLowat needs Linux; elsewhere in-flow latency includes the
// send buffer.
func SetNotSentLowat(net.Conn, int) {}

// BytesAcked needs Linux's TCP_INFO; elsewhere callers count body bytes.
func BytesAcked(net.Conn) (int64, bool) { return 0, false }
