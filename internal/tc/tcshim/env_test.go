package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvFile: under procd no environment reaches the shim; the file beside
// it sets what the environment leaves unset, and the shim never runs itself
// as the real tc. The shim is built and run as a router's services run it.
func TestEnvFile(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "tc")
	if out, err := exec.Command("go", "build", "-o", shim, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// the "real tc" prints what it was asked and the mapping the shim chose
	real := filepath.Join(dir, "real-tc")
	os.WriteFile(real, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755)
	os.WriteFile(shim+".env", []byte("SQMKIT_REAL_TC="+real+"\nSQMKIT_SHIM_FQ_CODEL=pfifo\n"), 0o644)
	c := exec.Command(shim, "qdisc", "add", "dev", "wan", "parent", "1:1", "handle", "10:", "nssfq_codel")
	c.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := c.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "qdisc add dev wan parent 1:1 handle 10: pfifo" {
		t.Errorf("with the env file: %v %q, want the real tc asked for a pfifo", err, out)
	}
	// the environment wins over the file
	c = exec.Command(shim, c.Args[1:]...)
	c.Env = []string{"PATH=/usr/bin:/bin", "SQMKIT_SHIM_FQ_CODEL=no"}
	if out, _ := c.CombinedOutput(); !strings.Contains(string(out), "fq_codel") {
		t.Errorf("the environment did not win: %q", out)
	}
}
