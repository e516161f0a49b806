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
