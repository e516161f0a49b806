package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummarize: gotest prints a failed test's output and each package's
// line, not a passing test's; it lists each skipped test with its reason
// and each test that absorbed a slow host.
func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: absorbed: the thread needed 2s of wall time\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: needs root for network namespaces\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:5: wrong answer\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`# a build line`,
	}, "\n")
	var out strings.Builder
	s := summarize(strings.NewReader(in), &out)
	s.print(&out, "unit")
	got := out.String()
	for _, want := range []string{"c_test.go:5: wrong answer", "FAIL\tp\t0.1s", "# a build line",
		"unit: 1 tests skipped, 1 absorbed a slow host", "skipped  p TestB: b_test.go:3: needs root for network namespaces",
		"absorbed p TestA: the thread needed 2s of wall time"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

// TestParts: each part's time is kept, and the table adds them up.
func TestParts(t *testing.T) {
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "bin"), 0o755)
	if code := runPart(repo, []string{"ok", "--", "true"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if code := runPart(repo, []string{"bad", "--", "false"}); code != 1 {
		t.Fatalf("a failing part: exit %d", code)
	}
	var out strings.Builder
	printParts(&out, repo)
	if !strings.Contains(out.String(), "ok ") || !strings.Contains(out.String(), "bad ") || !strings.Contains(out.String(), "all ") {
		t.Errorf("table:\n%s", out.String())
	}
}
