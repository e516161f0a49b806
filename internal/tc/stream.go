package tc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Stream is one long-lived `prog -force -batch -`: a caller that changes
// rates again and again (autorate) sends each change to it as lines,
// with no process per change. iproute2 runs a batch line by line as it
// reads it.
//
// Each Send ends with a sentinel, a line the tool refuses by design
// (an unknown object): its "Command failed -:N" on stderr says that every
// line before it has run, and any other failure reported since the
// previous sentinel belongs to one of this Send's lines.
type Stream struct {
	prog    string
	cmd     *exec.Cmd
	in      io.WriteCloser
	stderr  chan string // lines; closed when the tool exits
	line    int         // lines written so far
	Timeout time.Duration
}

// sentinel is the sync line: no tc or ip object has this name.
const sentinel = "sqmkit-sync"

// DefaultStreamTimeout bounds one Send: a change is a few netlink
// messages; a tool that takes a second is stuck.
const DefaultStreamTimeout = 2 * time.Second

// Stream starts prog's long-lived batch.
func (r *Runner) Stream(prog string) (*Stream, error) {
	cmd := exec.Command(prog, "-force", "-batch", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if r.Debug != nil {
		r.Debug(fmt.Sprintf("exec %s -force -batch - (long-lived)", prog))
	}
	r.procs.Add(1)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", prog, err)
	}
	s := &Stream{prog: prog, cmd: cmd, in: in, stderr: make(chan string, 64), Timeout: DefaultStreamTimeout}
	go func() {
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			s.stderr <- sc.Text()
		}
		close(s.stderr)
	}()
	return s, nil
}

// Send runs lines and waits until the tool has run them all. The error is
// a *BatchError naming the refused lines (every line runs: -force), or
// the tool's death or silence, after which the Stream is closed and a new
// one is needed.
func (s *Stream) Send(lines [][]string) error {
	text, err := Render(lines)
	if err != nil {
		return err
	}
	first := s.line + 1
	s.line += len(lines) + 1
	want := s.line
	if _, err := io.WriteString(s.in, text+sentinel+"\n"); err != nil {
		s.Close()
		return fmt.Errorf("%s -batch -: %w", s.prog, err)
	}
	var msgs []string
	timeout := time.After(s.Timeout)
	for {
		select {
		case l, ok := <-s.stderr:
			if !ok {
				err := s.Close()
				return fmt.Errorf("%s -batch - exited (%v) before running its lines", s.prog, err)
			}
			msgs = append(msgs, l)
			if n, ok := failedLine(l); ok && n == want {
				fails, _ := parseStderr(strings.Join(msgs, "\n"))
				var mine []Failure
				for _, f := range fails {
					if f.Line >= first && f.Line < want {
						f.Line -= first - 1 // numbered within this Send
						mine = append(mine, f)
					}
				}
				if len(mine) > 0 {
					return &BatchError{Prog: s.prog, Lines: lines, Failures: mine, Err: errors.New("refused")}
				}
				return nil
			}
		case <-timeout:
			s.Close()
			return fmt.Errorf("%s -batch - did not run %d lines within %v", s.prog, len(lines), s.Timeout)
		}
	}
}

// failedLine reads "Command failed -:N".
func failedLine(l string) (int, bool) {
	rest, ok := strings.CutPrefix(l, "Command failed ")
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	return n, err == nil
}

// Close ends the tool (EOF on its input) and waits for it.
func (s *Stream) Close() error {
	s.in.Close()
	done := make(chan error, 1)
	go func() {
		done <- s.cmd.Wait()
		for range s.stderr { // what nobody waits for any more
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		s.cmd.Process.Kill()
		return <-done
	}
}
