package procevents

import (
	"os"
	"os/exec"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// Every process counts, the started one included, whether or not it runs a
// program: a command substitution forks without exec.
func TestCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		tctest.Missing(t, "needs root for the kernel's process events")
	}
	w, err := Listen()
	if err != nil {
		t.Skipf("no process events here: %v", err)
	}
	defer w.Close()
	for _, tc := range []struct {
		script string
		want   Counts
	}{
		{"/bin/true; /bin/true; exit 0", Counts{Processes: 3, Execs: 3}},
		{"x=$(echo hi); /bin/true; exit 0", Counts{Processes: 3, Execs: 2}},
		{"exit 0", Counts{Processes: 1, Execs: 1}}, // measurements do not leak into each other
	} {
		w.Begin()
		if out, err := exec.Command("/bin/sh", "-c", tc.script).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if c := w.End(); c != tc.want {
			t.Errorf("%q: counts %+v, want %+v", tc.script, c, tc.want)
		}
	}
}
