package tctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
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
