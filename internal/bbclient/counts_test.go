package bbclient

import (
	"net"
	"testing"
	"time"
)

// A stream's count is what its socket moved, read when the counts are
// read: bytes that arrived while the test did not read them count at
// once, and the count stays when the stream ends.
func TestCountsFromKernel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	defer peer.Close()

	cs := newCounts(2)
	cs.app[1].Store(1000) // an earlier phase's stream 1
	own, untrack := cs.track(1, c, false)
	if own == &cs.app[1] {
		t.Skip("no TCP_INFO here: the streams count for themselves (not Linux)")
	}
	const n = 100 << 10
	if _, err := peer.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cs.load()[1] < 1000+n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// nothing was read from c: the kernel's count is the one that moved
	if got := cs.load(); got[0] != 0 || got[1] != 1000+n {
		t.Fatalf("counts %v, want [0 %d]", got, 1000+n)
	}
	own.Add(5) // what the stream counted itself does not count twice
	untrack()
	c.Close()
	if got := cs.load()[1]; got != 1000+n {
		t.Errorf("after the stream ended: %d, want %d", got, 1000+n)
	}
}
