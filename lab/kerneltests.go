package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// kernelTestsProfile is the profile name of the kernel tests' result row.
const kernelTestsProfile = "kernel"

// Kernel tests are Go tests named TestLab* that need qdiscs only the guest
// kernel has (sfq, prio, police, fq_codel, ...); on the host they skip.
// `make build` compiles their packages into bin/labtests/*.test and the
// guest runs them here, where a skip means a test did not test.

// labTestArgs select the kernel tests of a test binary.
var labTestArgs = []string{"-test.run", "^TestLab", "-test.v", "-test.count=1", "-test.timeout=5m"}

// runKernelTests runs every *.test binary in dir, writes each one's output
// to out/kerneltests/NAME.log and returns an error naming the binaries that
// failed, skipped or ran no TestLab test.
func runKernelTests(dir, out string) error {
	bins, err := filepath.Glob(filepath.Join(dir, "*.test"))
	if err != nil {
		return err
	}
	if len(bins) == 0 {
		return fmt.Errorf("no kernel test binaries (*.test) in %s: run `make build`", dir)
	}
	logs := filepath.Join(out, "kerneltests")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	var bad []string
	for _, bin := range bins {
		name := filepath.Base(bin)
		cmd := exec.Command(bin, labTestArgs...)
		cmd.Dir = logs // tests that write to the working directory stay in the results
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		runErr := cmd.Run()
		if err := os.WriteFile(filepath.Join(logs, strings.TrimSuffix(name, ".test")+".log"), buf.Bytes(), 0o644); err != nil {
			return err
		}
		if why := judgeKernelTests(buf.Bytes(), runErr); why != "" {
			bad = append(bad, name+" ("+why+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("kernel tests: %s; see %s", strings.Join(bad, ", "), logs)
	}
	return nil
}

var testResult = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// judgeKernelTests reads a test binary's -test.v output and exit error;
// it returns why the run counts as failed in the guest, "" when it passed.
func judgeKernelTests(out []byte, runErr error) string {
	var passed, skipped []string
	for _, m := range testResult.FindAllSubmatch(out, -1) {
		switch name := string(m[2]); string(m[1]) {
		case "PASS":
			passed = append(passed, name)
		case "SKIP":
			skipped = append(skipped, name)
		}
	}
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		return exit.String()
	case runErr != nil:
		return runErr.Error()
	case len(skipped) > 0:
		return "skipped " + strings.Join(skipped, " ")
	case len(passed) == 0:
		return "no TestLab test ran"
	}
	return ""
}
