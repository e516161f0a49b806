package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// shell runs programs, optionally inside a network namespace, and logs each
// command with its output so a failed scenario can be replayed by hand.
type shell struct {
	log io.Writer
	env []string // extra environment, e.g. PATH with the tc shim first
}

func (s *shell) cmd(ns string, args ...string) *exec.Cmd {
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	c := exec.Command(args[0], args[1:]...)
	c.Env = append(os.Environ(), s.env...)
	return c
}

// run returns the combined output; the error names the command.
func (s *shell) run(ns string, args ...string) (string, error) {
	return s.input(ns, "", args...)
}

func (s *shell) input(ns, stdin string, args ...string) (string, error) {
	out, _, err := s.exec(ns, stdin, args...)
	return out, err
}

// exec runs one program and returns its exit state as well (the resource
// use of it and of every descendant it waited for).
func (s *shell) exec(ns, stdin string, args ...string) (string, *os.ProcessState, error) {
	c := s.cmd(ns, args...)
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	fmt.Fprintf(s.log, "[%s]$ %s\n", nsName(ns), strings.Join(args, " "))
	if stdin != "" {
		fmt.Fprintf(s.log, "%s", indent(stdin, "  < "))
	}
	s.log.Write(out.Bytes())
	if err != nil {
		return out.String(), c.ProcessState, fmt.Errorf("%s in %s: %v: %s", strings.Join(args, " "), nsName(ns), err, strings.TrimSpace(out.String()))
	}
	return out.String(), c.ProcessState, nil
}

// must runs a list of commands, stopping at the first error.
func (s *shell) must(ns string, cmds ...[]string) error {
	for _, c := range cmds {
		if _, err := s.run(ns, c...); err != nil {
			return err
		}
	}
	return nil
}

// batch feeds lines to `tool -batch -` (tc or ip).
func (s *shell) batch(ns, tool string, lines []string) error {
	_, err := s.input(ns, strings.Join(lines, "\n")+"\n", tool, "-batch", "-")
	return err
}

// proc is a background program; done closes when it has exited.
type proc struct {
	*exec.Cmd
	done chan struct{}
	term bool // stopped with SIGTERM: nginx's master then stops its workers, which a kill leaves running
}

func (p *proc) stop() {
	if p.term {
		p.Process.Signal(syscall.SIGTERM)
	} else {
		p.Process.Kill()
	}
	<-p.done
}

// daemon starts a background program whose output goes to logPath.
func (s *shell) daemon(ns, logPath string, args ...string) (*proc, error) {
	c := s.cmd(ns, args...)
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	c.Stdout, c.Stderr = f, f
	fmt.Fprintf(s.log, "[%s]$ %s &  (log %s)\n", nsName(ns), strings.Join(args, " "), logPath)
	if err := c.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	p := &proc{Cmd: c, done: make(chan struct{})}
	go func() { c.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func nsName(ns string) string {
	if ns == "" {
		return "guest"
	}
	return ns
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + strings.TrimRight(l, "\n") + "\n")
	}
	return b.String()
}
