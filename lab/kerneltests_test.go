package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestIncomplete: a guest whose kernel panicked after the kernel tests and
// two of ten scenarios (as a 6.12 guest once did under `ci`) is an error
// naming the panic and where it crashed (the task, RIP), not "proven: all
// 1 scenarios"; a full run is none.
func TestIncomplete(t *testing.T) {
	console := filepath.Join(t.TempDir(), "console.log")
	os.WriteFile(console, []byte("lab: cable/fq_codel: PASS\n[  386.405501] CPU: 1 UID: 0 PID: 812 Comm: sqmkit Not tainted 6.12.117+deb13-amd64\n[  386.405583] RIP: 0010:kmem_cache_alloc_node_noprof+0x6e/0x310\n\x1b[0m[  386.405720] Kernel panic - not syncing: Fatal exception in interrupt\r\n"), 0o644)
	done := []result{{Profile: kernelTestsProfile, Backend: "TestLab", Status: "pass"}, {Profile: "cable", Backend: "none"}, {Profile: "cable", Backend: "fq_codel"}}
	err := incomplete(done, 10, console)
	if err == nil || !strings.Contains(err.Error(), "after 2 of 10 scenarios") || !strings.Contains(err.Error(), "Kernel panic - not syncing: Fatal exception in interrupt; CPU: 1 UID: 0 PID: 812 Comm: sqmkit Not tainted 6.12.117+deb13-amd64; RIP: 0010:kmem_cache_alloc_node_noprof+0x6e/0x310)") {
		t.Errorf("a guest that panicked: %v", err)
	}
	if err := incomplete(done, 2, console); err != nil {
		t.Errorf("every scenario has its result: %v", err)
	}
	if err := incomplete(done[:1], 1, filepath.Join(t.TempDir(), "none")); err == nil || strings.Contains(err.Error(), "panicked") {
		t.Errorf("a guest that stopped without a panic: %v", err)
	}
}

// fakeGuest stands in for qemu and the guest's program in TestGuestParts:
// each boot runs the kernel tests (when its plan has them) and then
// finishes the number of entries its script gives (-1: all) before its
// kernel panics, writing summary.json and progress.json as the guest does.
type fakeGuest struct {
	out    string
	script []int
	plans  [][]string // each boot's entries, by profile, and "kernel" when it ran the kernel tests
}

func (f *fakeGuest) boot(planPath string) error {
	var lp labPlan
	b, err := os.ReadFile(planPath)
	if err == nil {
		err = json.Unmarshal(b, &lp)
	}
	if err != nil {
		return err
	}
	finish := f.script[len(f.plans)]
	var seen []string // the plan's
	if lp.KernelTests {
		seen = append(seen, kernelTestsProfile)
	}
	for _, r := range lp.Runs {
		seen = append(seen, r.Profile)
	}
	f.plans = append(f.plans, seen)
	var rs []result
	console := "lab: clocksource tsc\n"
	if lp.KernelTests {
		if finish != 0 {
			rs = append(rs, result{Profile: kernelTestsProfile, Backend: "TestLab"})
			writeJSON(filepath.Join(f.out, "summary.json"), rs)
			writeJSON(filepath.Join(f.out, progressFile), progress{KernelTests: true})
		}
	}
	for i, r := range lp.Runs {
		if finish >= 0 && i >= finish {
			break
		}
		for _, b := range r.Backends {
			rs = append(rs, result{Profile: r.Profile, Backend: b})
		}
		writeJSON(filepath.Join(f.out, "summary.json"), rs)
		writeJSON(filepath.Join(f.out, progressFile), progress{KernelTests: lp.KernelTests, RunsDone: i + 1})
	}
	if finish < 0 { // a guest that finished powers off, and its init's exit may race that
		console += "[  441.169364] sysrq: Power Off\n[  441.179160] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00007e00\n"
	} else {
		console += "[  386.405] BUG: unable to handle page fault for address: ffff\n[  386.405] RIP: 0010:kmem_cache_alloc_node_noprof+0x6e/0x310\n\x1b[0m[  386.405720] Kernel panic - not syncing: Fatal exception in interrupt\r\n"
	}
	return os.WriteFile(filepath.Join(f.out, "console.log"), []byte(console), 0o644)
}

// TestGuestParts: a guest whose kernel panicked leaves the entries it did
// not finish to a new guest, up to maxGuests, whether it panicked while
// booting, in the kernel tests or after some entries (a resumed guest
// may panic too: the next one counts its own entries, not the first
// one's); summary.json holds every guest's results and each earlier
// guest's console is kept. A run whose last guest panicked too is an
// error naming the panic.
func TestGuestParts(t *testing.T) {
	runs := []planRun{{Profile: "a", Backends: []string{"none", "cake"}}, {Profile: "b", Backends: []string{"journey"}, Mode: "journey"}, {Profile: "c", Backends: []string{"cake"}}}
	const n = 4
	all := []string{"kernel", "a", "b", "c"}
	for _, tc := range []struct {
		name   string
		script []int
		plans  [][]string // what each guest was asked to run
		proven int        // scenarios with a result, of n
	}{
		{"no panic", []int{-1}, [][]string{all}, n},
		{"while booting", []int{0, -1}, [][]string{all, all}, n},
		{"after an entry, then the next guest before its first", []int{1, 0, -1}, [][]string{all, {"b", "c"}, {"b", "c"}}, n},
		{"three times", []int{2, 0, 0}, [][]string{all, {"c"}, {"c"}}, 3},
	} {
		out := t.TempDir()
		planPath := filepath.Join(out, "plan.json")
		writeJSON(planPath, labPlan{Runs: runs, KernelTests: true, Out: out})
		f := &fakeGuest{out: out, script: tc.script}
		rs, err := guestParts(out, planPath, n, f.boot)
		if !slices.EqualFunc(f.plans, tc.plans, slices.Equal) {
			t.Errorf("%s: the guests ran %v, want %v", tc.name, f.plans, tc.plans)
		}
		var proven []string
		for _, r := range rs {
			if r.Profile != kernelTestsProfile {
				proven = append(proven, r.Profile+"/"+r.Backend)
			}
		}
		if slices.Sort(proven); len(proven) != tc.proven || len(slices.Compact(slices.Clone(proven))) != len(proven) {
			t.Errorf("%s: results %v, want %d", tc.name, proven, tc.proven)
		}
		if tc.proven == n && err != nil || tc.proven < n && (err == nil || !strings.Contains(err.Error(), "Kernel panic")) {
			t.Errorf("%s: %v", tc.name, err)
		}
		var sum []result
		if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || len(sum) != len(rs) {
			t.Errorf("%s: summary.json holds %d results, the run %d (%v)", tc.name, len(sum), len(rs), err)
		}
		for part := 1; part < len(tc.plans); part++ {
			if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("console-part%d.log", part))); err != nil {
				t.Errorf("%s: guest %d's console: %v", tc.name, part, err)
			}
		}
	}
}

// TestOops: the lines a run prints of its guest's panic start at the
// report's first line and end at the panic, without terminal control.
func TestOops(t *testing.T) {
	console := "lab: cable/fq_codel: PASS\n[  10.1] virtio_net: up\n[  386.1] BUG: unable to handle page fault\n[  386.2] Oops: 0000 [#1] PREEMPT SMP NOPTI\n[  386.3] RIP: 0010:kmem_cache_alloc_node_noprof+0x6e/0x310\n\x1b[0m[  386.4] Kernel panic - not syncing: Fatal exception in interrupt\r\n[  386.5] Kernel Offset: disabled\n"
	got := oops(console)
	want := []string{"[  386.1] BUG: unable to handle page fault", "[  386.2] Oops: 0000 [#1] PREEMPT SMP NOPTI", "[  386.3] RIP: 0010:kmem_cache_alloc_node_noprof+0x6e/0x310", "[  386.4] Kernel panic - not syncing: Fatal exception in interrupt"}
	if !slices.Equal(got, want) {
		t.Errorf("oops: %q, want %q", got, want)
	}
	long := strings.Repeat("[  1.0] noise\n", 2*oopsMax) + "[  2.0] Kernel panic - not syncing: x\n"
	if got := oops(long); len(got) != oopsMax || got[len(got)-1] != "[  2.0] Kernel panic - not syncing: x" {
		t.Errorf("a panic without a report: %d lines ending %q", len(got), got[len(got)-1])
	}
}

// TestResumePlan: after a guest's kernel panicked, the plan of what is
// left holds the entries after the last one it finished, and the kernel
// tests only when they had not run; a guest that finished every entry
// leaves nothing to resume.
func TestResumePlan(t *testing.T) {
	runs := []planRun{{Profile: "a", Backends: []string{"none", "cake"}}, {Profile: "b", Mode: "journey"}, {Profile: "c", Backends: []string{"cake"}}}
	for _, tc := range []struct {
		name     string
		progress string // "": none written
		want     []string
		kernel   bool
	}{
		{"in the kernel tests", "", []string{"a", "b", "c"}, true},
		{"in the first entry", `{"kernel_tests": true}`, []string{"a", "b", "c"}, false},
		{"in the second entry", `{"kernel_tests": true, "runs_done": 1}`, []string{"b", "c"}, false},
		{"after the last entry", `{"kernel_tests": true, "runs_done": 3}`, nil, false},
	} {
		out := t.TempDir()
		planPath := filepath.Join(out, "plan.json")
		writeJSON(planPath, labPlan{Runs: runs, KernelTests: true, Commit: "abc1234"})
		if tc.progress != "" {
			os.WriteFile(filepath.Join(out, progressFile), []byte(tc.progress), 0o644)
		}
		rest, _, err := resumePlan(out, planPath)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil {
			if rest != "" {
				t.Errorf("%s: resumes %s", tc.name, rest)
			}
			continue
		}
		var lp labPlan
		b, err := os.ReadFile(rest)
		if err == nil {
			err = json.Unmarshal(b, &lp)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, r := range lp.Runs {
			got = append(got, r.Profile)
		}
		if !slices.Equal(got, tc.want) || lp.KernelTests != tc.kernel || lp.Commit != "abc1234" {
			t.Errorf("%s: runs %v, kernel tests %v, commit %q; want %v, %v", tc.name, got, lp.KernelTests, lp.Commit, tc.want, tc.kernel)
		}
	}
}

// TestDriveJourneyStops: when its guest is gone, the journey's browser is
// stopped and writes no done.json, so a panicked guest's browser cannot
// answer the journey of the guest that runs the rest; a browser that
// finished writes one.
func TestDriveJourneyStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		stop   bool
	}{
		{"stopped", "sleep 60", true},
		{"finished", "echo '{\"ok\": true}' > \"$SQMKIT_JOURNEY/browser.json\"", false},
	} {
		dir := t.TempDir()
		browser := filepath.Join(dir, "browser.test")
		os.WriteFile(browser, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755)
		os.WriteFile(filepath.Join(dir, "ready.json"), []byte("{}"), 0o644)
		ctx, guestGone := context.WithCancel(context.Background())
		defer guestGone()
		returned := make(chan struct{})
		go func() {
			driveJourney(ctx, dir, browser, 1)
			close(returned)
		}()
		if tc.stop {
			for _, err := os.Stat(filepath.Join(dir, "browser.log")); err != nil; _, err = os.Stat(filepath.Join(dir, "browser.log")) {
				time.Sleep(50 * time.Millisecond) // the browser started
			}
			guestGone()
		}
		select {
		case <-returned:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the browser still runs", tc.name)
		}
		b, err := os.ReadFile(filepath.Join(dir, "done.json"))
		if tc.stop && err == nil {
			t.Errorf("%s: done.json written: %s", tc.name, b)
		}
		if !tc.stop && (err != nil || !strings.Contains(string(b), `"ok":true`)) {
			t.Errorf("%s: done.json %s (%v)", tc.name, b, err)
		}
	}
}

// TestPanicLine: a crash is a panic; the init's exit racing the guest's
// own power-off (as a run's last lines showed on 6.12 and 7) is not, and
// a crash before the power-off still is.
func TestPanicLine(t *testing.T) {
	crash := "[  386.4] Kernel panic - not syncing: Fatal exception in interrupt\r\n"
	off := "lab: cable/cake: PASS\n[  441.169364] sysrq: Power Off\n[  441.179160] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00007e00\n"
	for _, tc := range []struct{ name, console, want string }{
		{"a crash", "lab: cable/none\n" + crash, "Kernel panic - not syncing: Fatal exception in interrupt"},
		{"the power-off", off, ""},
		{"a crash, then the power-off", crash + off, "Kernel panic - not syncing: Fatal exception in interrupt"},
		{"none", "lab: cable/none\n", ""},
	} {
		if got := panicLine(tc.console); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
