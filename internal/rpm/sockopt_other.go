//go:build !linux

package rpm

import "net"

// setNotSentLowat is Linux-only; elsewhere the kernel's default backlog stays.
func setNotSentLowat(net.Conn) {}
