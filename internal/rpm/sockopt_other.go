//go:build !linux

package rpm

import "net"

// setNotSentLowat is Linux-only; elsewhere the kernel's default backlog stays.
func setNotSentLowat(net.Conn) {}

// bytesAcked needs Linux's TCP_INFO; elsewhere callers count body bytes.
func bytesAcked(net.Conn) (int64, bool) { return 0, false }
