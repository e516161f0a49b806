// Package tc runs the iproute2 tools (tc, ip) the way sqmkit needs them: whole
// command lists fed to one `-batch -` process, failures mapped back to the
// line that caused them, and every process counted so a start can be held to
// its budget.
package tc

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
)

// Runner starts tc and ip. The programs are looked up on PATH at every call,
// so a lab shim or a test fake placed first on PATH takes their place.
type Runner struct {
	// Debug, when set, gets each command line and its batch input.
	Debug func(string)

	procs atomic.Int64
}

// Procs is the number of processes the Runner has started.
func (r *Runner) Procs() int64 { return r.procs.Load() }

// Failure is one batch line the tool refused.
type Failure struct {
	Line int    // 1-based line of the batch; 0 when the tool died without saying
	Msg  string // what the tool printed about it
}

// BatchError reports a batch that did not fully apply.
type BatchError struct {
	Prog     string
	Lines    [][]string
	Failures []Failure // in line order; the first one is the cause
	Err      error     // the exit status
}

// First returns the first refused line and its argv (nil when unknown).
func (e *BatchError) First() (Failure, []string) {
	if len(e.Failures) == 0 {
		return Failure{}, nil
	}
	f := e.Failures[0]
	if f.Line >= 1 && f.Line <= len(e.Lines) {
		return f, e.Lines[f.Line-1]
	}
	return f, nil
}

func (e *BatchError) Error() string {
	f, argv := e.First()
	msg := f.Msg
	if msg == "" {
		msg = e.Err.Error()
	}
	if h := hint(argv, msg); h != "" {
		msg += " — " + h
	}
	if argv == nil {
		return fmt.Sprintf("%s -batch: %s", e.Prog, msg)
	}
	return fmt.Sprintf("%s -batch line %d `%s %s`: %s", e.Prog, f.Line, e.Prog, strings.Join(argv, " "), msg)
}

func (e *BatchError) Unwrap() error { return e.Err }

// Batch feeds lines to `prog [-force] -batch -` in one process. Without force
// the tool stops at the first refused line; with force it runs every line and
// reports each refusal. Warnings the tool printed for accepted lines are
// returned separately so callers can log them.
func (r *Runner) Batch(prog string, force bool, lines [][]string) (warnings []string, err error) {
	var opts []string
	if force {
		opts = []string{"-force"}
	}
	_, warnings, err = r.run(prog, opts, lines)
	return warnings, err
}

// run executes prog with opts and `-batch -`, returning stdout.
func (r *Runner) run(prog string, opts []string, lines [][]string) (stdout []byte, warnings []string, err error) {
	in, err := Render(lines)
	if err != nil {
		return nil, nil, err
	}
	args := append(append([]string{}, opts...), "-batch", "-")
	if r.Debug != nil {
		r.Debug(fmt.Sprintf("exec %s %s <<EOF\n%sEOF", prog, strings.Join(args, " "), in))
	}
	cmd := exec.Command(prog, args...)
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	r.procs.Add(1)
	runErr := cmd.Run()
	fails, warnings := parseStderr(errb.String())
	if runErr == nil {
		return out.Bytes(), warnings, nil
	}
	var exitErr *exec.ExitError
	if !errors.As(runErr, &exitErr) {
		return nil, warnings, fmt.Errorf("%s: %w", prog, runErr)
	}
	if len(fails) == 0 {
		fails = []Failure{{Msg: runErr.Error()}}
	}
	return out.Bytes(), warnings, &BatchError{Prog: prog, Lines: lines, Failures: fails, Err: runErr}
}

// parseStderr splits iproute2's batch stderr into refusals, each ended by
// "Command failed -:N", and warnings for accepted lines. Text after the last
// "Command failed" belongs to a line the tool died on without numbering it
// (iproute2 calls exit() on some parse errors): Line 0. Usage texts are
// dropped; the line before them says what was wrong.
func parseStderr(s string) (fails []Failure, warnings []string) {
	var msg []string
	usage := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t\r")
		switch {
		case l == "":
		case strings.HasPrefix(l, "Warning:"):
			warnings = append(warnings, l)
		case strings.HasPrefix(l, "Command failed "):
			n := 0
			if i := strings.LastIndexByte(l, ':'); i >= 0 {
				n, _ = strconv.Atoi(l[i+1:])
			}
			fails = append(fails, Failure{Line: n, Msg: strings.Join(msg, "; ")})
			msg, usage = nil, false
		case strings.HasPrefix(l, "Usage:"):
			usage = true
		case !usage:
			msg = append(msg, strings.TrimSpace(l))
		}
	}
	if len(msg) > 0 {
		fails = append(fails, Failure{Msg: strings.Join(msg, "; ")})
	}
	return fails, warnings
}
