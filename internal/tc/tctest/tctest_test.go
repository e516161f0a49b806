package tctest

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMissingFailsUnderCI: a missing prerequisite skips, and fails under
// CI=true. The case runs in a child process, as a failing test would
// fail this one.
func TestMissingFailsUnderCI(t *testing.T) {
	if os.Getenv("TCTEST_CHILD") == "1" {
		Missing(t, "needs %s", "a program")
		return
	}
	self, _ := os.Executable()
	for _, ci := range []string{"", "true"} {
		c := exec.Command(self, "-test.run=^TestMissingFailsUnderCI$", "-test.v")
		c.Env = append(os.Environ(), "TCTEST_CHILD=1", "CI="+ci)
		out, err := c.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Errorf("without CI: %v\n%s", err, out)
		case ci == "true" && (err == nil || !strings.Contains(string(out), "CI=true, and needs a program")):
			t.Errorf("under CI=true: %v\n%s", err, out)
		}
	}
}

// TestRouted: a and b reach each other through r only, and LossBased
// leaves their new sockets on cubic whatever the host's default is.
func TestRouted(t *testing.T) {
	a, r, b := NewRouted(t, "rt", 97)
	LossBased(t, a, b)
	a.Exec(t, "ping", "-c", "1", "-W", "2", b.Addr)
	if route := a.Exec(t, "ip", "route", "get", b.Addr); !strings.Contains(route, "via "+r.Addr) {
		t.Errorf("a's route to b: %s", route)
	}
	for _, n := range []*Netns{a, b} {
		if cc := strings.TrimSpace(n.Exec(t, "sysctl", "-n", "net.ipv4.tcp_congestion_control")); cc != "cubic" {
			t.Errorf("%s: congestion control %q", n.Name, cc)
		}
	}
}

// TestWaitListening: it returns nil once a TCP or a UDP socket listens in
// the namespace, and an error when one listens only in the host's
// namespace, or when the network is neither.
func TestWaitListening(t *testing.T) {
	ns := NewNetns(t, "wl")
	var closers []io.Closer
	ns.Do(t, func() {
		exec.Command("ip", "link", "set", "lo", "up").Run()
		if ln, err := net.Listen("tcp4", "127.0.0.1:7391"); err == nil {
			closers = append(closers, ln)
		}
		if pc, err := net.ListenPacket("udp4", "127.0.0.1:7392"); err == nil {
			closers = append(closers, pc)
		}
	})
	for _, c := range closers {
		defer c.Close()
	}
	if len(closers) != 2 {
		t.Fatalf("listened on %d of 2 sockets in %s", len(closers), ns.Name)
	}
	host, err := net.Listen("tcp4", "127.0.0.1:7393") // the host's namespace, not ns
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	for _, tc := range []struct {
		network string
		port    int
		ok      bool
	}{{"tcp", 7391, true}, {"udp", 7392, true}, {"tcp", 7393, false}, {"udp", 7391, false}, {"sctp", 7391, false}} {
		if err := WaitListening(ns.Name, tc.network, tc.port, 500*time.Millisecond); (err == nil) != tc.ok {
			t.Errorf("%s port %d: %v, want listening %v", tc.network, tc.port, err, tc.ok)
		}
	}
}
