package rpcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/joblock"
	"github.com/sqmkit/sqmkit/internal/statefile"
)

// A job is a test or a tune running in the background: rpcd ends a call
// after 120 s and a tune takes minutes, and the page that started it may
// close. Its state is one directory under Root/var/run/sqmkit/luci/NAME,
// so a second browser sees the same job: job.lock (held by the job's
// process while it runs), meta.json (what was asked, when), log (its
// stderr: the progress lines) and the --json file it writes when done.
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

// lockName is the job's lock in its directory (joblock): held by the
// job's process for its whole life, from the call that starts it on.
const lockName = "job"

// running says whether the job's process lives (it holds the lock).
func (j job) running() bool { _, ok := joblock.Held(j.dir, lockName); return ok }

// start runs exe with args (and env added to rpcd's environment) in the
// background, its stderr and stdout in the log, unless the job runs
// already. The lock is taken before anything is written and handed to the
// job's process, which holds it until it ends, however it ends; of calls
// at once one starts the job and the others are refused
// (TestJobStartsOnce).
func (j job) start(exe string, args []string, env []string, m meta) error {
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return err
	}
	l, err := joblock.Take(j.dir, lockName, joblock.Holder{Kind: j.name, PID: os.Getpid(), Started: m.Started, What: m.Server})
	if err != nil {
		var busy *joblock.Busy
		if errors.As(err, &busy) {
			return fmt.Errorf("a %s is running since %s; wait for it to end", j.name, busy.Holder.Started.Local().Format("15:04:05"))
		}
		return err
	}
	defer l.Release() // the job's process holds it on
	log, err := statefile.Create(filepath.Join(j.dir, "log"))
	if err != nil {
		return err
	}
	defer log.Close()
	os.Remove(m.Out)
	b, _ := json.Marshal(m)
	if err := statefile.Write(filepath.Join(j.dir, "meta.json"), b, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	// secrets (the token) in the environment, which only root reads, not
	// in the arguments, which every local user does (/proc/PID/cmdline)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, "/"
	cmd.ExtraFiles = []*os.File{l.File()}
	// its own session: it outlives rpcd's call and the page's connection
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", exe, err)
	}
	go cmd.Wait() // reaped when the calling process lives on (tests); rpcd's call exits at once
	return l.Owner(joblock.Holder{Kind: j.name, PID: cmd.Process.Pid, Started: m.Started, What: m.Server})
}

// read decodes the job's file name into v.
func (j job) read(name string, v any) error { return readJSON(filepath.Join(j.dir, name), v) }

// maxState caps a job's state file read back: a test's result with every
// probe is a few MB at most.
const maxState = 32 << 20

// lines are the last n lines of the job's log, without sqmkit's prefix.
func (j job) lines(n int) []string {
	b, err := statefile.Read(filepath.Join(j.dir, "log"), maxState, j.name+" log")
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
	b, err := statefile.Read(path, maxState, filepath.Base(path))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
