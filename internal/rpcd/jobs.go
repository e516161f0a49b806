package rpcd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
)

// A job is a test or a tune running in the background: rpcd ends a call
// after 120 s and a tune takes minutes, and the page that started it may
// close. Its state is one directory under Root/var/run/sqmkit/luci/NAME,
// so a second browser sees the same job: lock (the pid, while it runs),
// meta.json (what was asked, when), log (its stderr: the progress lines)
// and the --json file it writes when done.
type job struct {
	name, dir string
}

func (e *Env) job(name string) job {
	return job{name: name, dir: filepath.Join(e.Root, "var/run/sqmkit/luci", name)}
}

// meta is what a job was asked to do.
type meta struct {
	Started time.Time `json:"started"`
	Server  string    `json:"server,omitempty"`
	Section string    `json:"section,omitempty"`
	Target  string    `json:"target,omitempty"`
	Budget  int       `json:"budget_s,omitempty"`
	Out     string    `json:"out"` // the --json file
}

// pid is the job's process while it runs: the lock's pid, alive and
// running this job (its command line names the job's directory, so a
// reused pid is not mistaken for it).
func (j job) pid() (int, bool) {
	b, err := os.ReadFile(filepath.Join(j.dir, "lock"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return pid, err == nil && bytes.Contains(cmd, []byte(j.dir))
}

func (j job) running() bool { _, ok := j.pid(); return ok }

// start runs exe with args in the background, its stderr and stdout in the
// log, unless the job runs already: the lock is made with O_EXCL, so of
// two calls at once one starts it and the other is refused
// (TestJobRefusesSecondStart).
func (j job) start(exe string, args []string, m meta) error {
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return err
	}
	lock := filepath.Join(j.dir, "lock")
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if pid, ok := j.pid(); ok {
			var was meta
			j.read("meta.json", &was)
			return fmt.Errorf("a %s is running since %s (pid %d); wait for it to end", j.name, was.Started.Local().Format("15:04:05"), pid)
		}
		os.Remove(lock) // its process ended
		f, err = os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", lock, err)
	}
	defer f.Close()
	log, err := os.Create(filepath.Join(j.dir, "log"))
	if err != nil {
		os.Remove(lock)
		return err
	}
	defer log.Close()
	os.Remove(m.Out)
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(j.dir, "meta.json"), b, 0o644); err != nil {
		os.Remove(lock)
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, "/"
	// its own session: it outlives rpcd's call and the page's connection
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		os.Remove(lock)
		return fmt.Errorf("starting %s: %w", exe, err)
	}
	go cmd.Wait() // reaped when the calling process lives on (tests); rpcd's call exits at once
	_, err = fmt.Fprintf(f, "%d\n", cmd.Process.Pid)
	return err
}

// read decodes the job's file name into v.
func (j job) read(name string, v any) error { return readJSON(filepath.Join(j.dir, name), v) }

// maxState caps a job's state file read back: a test's result with every
// probe is a few MB at most.
const maxState = 32 << 20

// lines are the last n lines of the job's log, without sqmkit's prefix.
func (j job) lines(n int) []string {
	b, err := sizelimit.ReadFile(filepath.Join(j.dir, "log"), maxState, j.name+" log")
	if err != nil {
		return []string{}
	}
	out := []string{}
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(l, "sqmkit tune: "), "sqmkit test: "))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// running says which jobs run now, for the status page.
func (e *Env) running() map[string]bool {
	return map[string]bool{"test": e.job("test").running(), "tune": e.job("tune").running()}
}

// readJSON decodes a state file of at most maxState bytes.
func readJSON(path string, v any) error {
	b, err := sizelimit.ReadFile(path, maxState, filepath.Base(path))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
