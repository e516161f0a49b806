// Package bbservertest runs an in-process `sqmkit serve` on loopback for
// tests of the clients (bbclient, tune).
package bbservertest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbserver"
)

// ListenPair listens on TCP and UDP with the same port, as the client
// expects; port 0 picks a port free for both.
func ListenPair(addr string) (net.Listener, *net.UDPConn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for try := 0; try < 20; try++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return ln, pc.(*net.UDPConn), nil
		}
		ln.Close()
		if port != "0" {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("no port free for both TCP and UDP on %s", host)
}

// Serve runs a server on host's loopback until the test ends (or stop is
// called) and returns its address. A host without that loopback skips
// the test, saying so.
func Serve(t testing.TB, host string, cfg bbserver.Config) (addr string, stop func()) {
	t.Helper()
	ln, pc, err := ListenPair(net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s loopback: %v", host, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bbserver.New(cfg).Serve(ctx, ln, pc); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), stop
}
