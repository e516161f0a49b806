package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestLifecycleCLI drives the built binary inside a test namespace, with
// the lab tc shim on PATH standing in for the NSS tc (nss backend, flags only).
func TestLifecycleCLI(t *testing.T) {
	ns := tctest.NewNetns(t, "cli")
	bin := t.TempDir()
	for pkg, out := range map[string]string{".": "sqmkit", "../../lab/tcshim": "tc"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(bin, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	root, cache := t.TempDir(), t.TempDir()
	run := func(want int, args ...string) string {
		t.Helper()
		full := append([]string{"netns", "exec", ns.Name, "env", "PATH=" + bin + ":" + os.Getenv("PATH"),
			"SQMKIT_SHIM_FQ_CODEL=pfifo", filepath.Join(bin, "sqmkit")}, args...)
		if args[0] != "status" {
			full = append(full, "--probe-cache", cache)
		}
		full = append(full, "--root", root, "--interface", "wan", "--backend", "nss", "--download", "20000", "--upload", "10000")
		out, err := exec.Command("ip", full...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("sqmkit %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return string(out)
	}
	qdiscs := func() string { return ns.Exec(t, "tc", "qdisc", "show", "dev", "wan") }

	run(0, "stop")
	if out := run(0, "start", "--dry-run"); !strings.Contains(out, "tc -batch - <<'EOF'") || !strings.Contains(out, "nsstbl") {
		t.Errorf("dry-run output lacks the batches:\n%s", out)
	}
	if q := qdiscs(); !strings.Contains(q, "noqueue") {
		t.Errorf("dry-run touched the kernel: %s", q)
	}
	if out := run(0, "start"); !strings.Contains(out, "started") {
		t.Errorf("start output:\n%s", out)
	}
	if out := run(0, "status"); !strings.Contains(out, "shaped as planned") || !strings.Contains(out, "nssfq_codel") {
		t.Errorf("status output:\n%s", out)
	}
	run(0, "restart")
	run(0, "stop")
	if q := qdiscs(); strings.Contains(q, "tbf") || strings.Contains(q, "ingress") {
		t.Errorf("stop left qdiscs: %s", q)
	}
	if out := run(1, "status"); !strings.Contains(out, "differs") {
		t.Errorf("status after stop:\n%s", out)
	}
	run(0, "stop")
}
