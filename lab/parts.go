package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// make test's parts: each runs through `sqmkit-lab part NAME -- CMD...`
// (a Go test run through `gotest NAME -- ARGS...`), which records how long
// it took in bin/test-parts.tsv; `parts` prints that table, and a part
// that fails prints it so far. gotest runs `go test -json` and prints what
// `go test` would (a failing test's output, each package's line), then
// every test that was skipped, and every test that absorbed a slow host
// (a line it logged through tctest.Absorbed), with why: a flake a retry or a
// longer wait hid is still seen (issue #73).

const (
	partUsage   = "  part NAME -- CMD...           run one part of make test, timed (bin/test-parts.tsv)\n"
	gotestUsage = "  gotest NAME -- GO-TEST-ARGS   go test, timed, then the tests it skipped and those that absorbed a slow host\n"
	partsUsage  = "  parts                         the table of make test's parts and their times\n"
)

// partsFile is where the parts' times are kept.
func partsFile(repo string) string { return filepath.Join(repo, "bin", "test-parts.tsv") }

func runPart(repo string, args []string) int {
	name, cmd, ok := partArgs(args)
	if !ok {
		fmt.Fprint(os.Stderr, "usage: sqmkit-lab"+partUsage)
		return 2
	}
	start := time.Now()
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := c.Run()
	return partDone(repo, name, start, commandExit(err))
}

func runGoTest(repo string, args []string) int {
	name, goArgs, ok := partArgs(args)
	if !ok {
		fmt.Fprint(os.Stderr, "usage: sqmkit-lab"+gotestUsage)
		return 2
	}
	start := time.Now()
	c := exec.Command("go", append([]string{"test", "-json"}, goArgs...)...)
	c.Stdin, c.Stderr = os.Stdin, os.Stderr
	out, err := c.StdoutPipe()
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqmkit-lab gotest:", err)
		return partDone(repo, name, start, 1)
	}
	s := summarize(out, os.Stdout)
	code := commandExit(c.Wait())
	s.print(os.Stdout, name)
	return partDone(repo, name, start, code)
}

func runParts(repo string, args []string) int {
	printParts(os.Stdout, repo)
	return 0
}

// partArgs splits NAME -- REST.
func partArgs(args []string) (name string, rest []string, ok bool) {
	if len(args) < 3 || args[1] != "--" {
		return "", nil, false
	}
	return args[0], args[2:], true
}

// commandExit is a finished command's exit status (1 when it did not run).
func commandExit(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// partDone records the part's time and outcome, and prints the table when
// it failed (the parts after it do not run).
func partDone(repo, name string, start time.Time, code int) int {
	f, err := os.OpenFile(partsFile(repo), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s\t%d\t%d\n", name, int(time.Since(start).Seconds()+0.5), code)
		f.Close()
	}
	if code != 0 {
		printParts(os.Stdout, repo)
	}
	return code
}

func printParts(w io.Writer, repo string) {
	b, err := os.ReadFile(partsFile(repo))
	if err != nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nmake test's parts\tseconds\tminutes\texit\t")
	total := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var name string
		var secs, code int
		if n, _ := fmt.Sscanf(strings.ReplaceAll(l, "\t", " "), "%s %d %d", &name, &secs, &code); n != 3 {
			continue
		}
		total += secs
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t\n", name, secs, float64(secs)/60, code)
	}
	fmt.Fprintf(tw, "all\t%d\t%.1f\t\t\n", total, float64(total)/60)
	tw.Flush()
}

// testEvent is one line of `go test -json` (Go's test2json format).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// testSummary is what gotest saw: each test skipped or absorbing a slow
// host, with its reason.
type testSummary struct {
	skipped, absorbed []string
}

// summarize reads `go test -json` from r and writes what `go test` would
// print: the output of every test that failed, and every package's own
// lines (its ok or FAIL line, a build failure).
func summarize(r io.Reader, w io.Writer) *testSummary {
	s := &testSummary{}
	logs := map[string][]string{} // package and test → its output
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not an event: the build's own words
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "output" && e.Test == "":
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") && e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output":
			logs[key] = append(logs[key], e.Output)
			if i := strings.Index(e.Output, tctest.AbsorbedPrefix); i >= 0 {
				s.absorbed = append(s.absorbed, fmt.Sprintf("%s %s: %s", e.Package, e.Test, strings.TrimSpace(e.Output[i+len(tctest.AbsorbedPrefix):])))
			}
		case e.Action == "skip" && e.Test != "":
			s.skipped = append(s.skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(logs[key])))
			delete(logs, key)
		case e.Action == "fail" && e.Test != "":
			fmt.Fprint(w, strings.Join(logs[key], ""))
			delete(logs, key)
		case e.Action == "pass":
			delete(logs, key)
		}
	}
	return s
}

// skipReason is what a skipped test said: the lines of its output that
// are not the runner's own.
func skipReason(out []string) string {
	var why []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		why = append(why, t)
	}
	return strings.Join(why, " ")
}

func (s *testSummary) print(w io.Writer, name string) {
	fmt.Fprintf(w, "\n%s: %d tests skipped, %d absorbed a slow host\n", name, len(s.skipped), len(s.absorbed))
	for _, l := range s.skipped {
		fmt.Fprintln(w, "  skipped  "+l)
	}
	for _, l := range s.absorbed {
		fmt.Fprintln(w, "  absorbed "+l)
	}
}
