package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestJudgeKernelTests(t *testing.T) {
	exit1 := exec.Command("sh", "-c", "exit 1").Run()
	tests := []struct {
		name string
		out  string
		err  error
		want string // substring of the verdict; "" = passed
	}{
		{name: "passed with subtests", out: "=== RUN   TestLabX\n=== RUN   TestLabX/a\n--- PASS: TestLabX (0.20s)\n    --- PASS: TestLabX/a (0.10s)\nPASS\n"},
		{name: "failed subtest", out: "--- FAIL: TestLabX (0.20s)\n    --- FAIL: TestLabX/a (0.10s)\nFAIL\n", err: exit1, want: "exit status 1"},
		{name: "no test matched", out: "testing: warning: no tests to run\nPASS\n", want: "no TestLab test ran"},
		{name: "whole test skipped", out: "=== RUN   TestLabX\n    x_test.go:9: this kernel lacks sfq\n--- SKIP: TestLabX (0.00s)\nPASS\n", want: "skipped TestLabX"},
		{name: "one subtest skipped", out: "--- PASS: TestLabX (0.20s)\n    --- PASS: TestLabX/a (0.10s)\n    --- SKIP: TestLabX/b (0.00s)\nPASS\n", want: "skipped TestLabX/b"},
		{name: "not started", err: exec.ErrNotFound, want: "executable file not found"},
		{name: "a log line quoting a result is not one", out: "--- PASS: TestLabX (0.20s)\n    x_test.go:3: want --- SKIP: never\nPASS\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeKernelTests([]byte(tt.out), tt.err)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("verdict %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunKernelTests(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if err := runKernelTests(dir, out); err == nil || !strings.Contains(err.Error(), "no kernel test binaries") {
		t.Fatalf("empty dir: %v", err)
	}
	// stand-in test binaries: a shell script prints what a test binary would
	for name, script := range map[string]string{
		"good.test":  "echo \"$@\"; echo '--- PASS: TestLabA (0.01s)'",
		"skips.test": "echo '--- SKIP: TestLabB (0.00s)'",
		"fails.test": "echo '--- FAIL: TestLabC (0.00s)'; exit 1",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := runKernelTests(dir, out)
	if err == nil {
		t.Fatal("no error for a skipping and a failing binary")
	}
	for _, s := range []string{"skips.test (skipped TestLabB)", "fails.test (exit status 1)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if strings.Contains(err.Error(), "good.test") {
		t.Errorf("error %q names the passing binary", err)
	}
	log, rerr := os.ReadFile(filepath.Join(out, "kerneltests", "good.log"))
	if rerr != nil || !strings.Contains(string(log), "-test.run ^TestLab") || !strings.Contains(string(log), "--- PASS: TestLabA") {
		t.Errorf("good.log: %v\n%s", rerr, log)
	}
}
