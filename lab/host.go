package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/initramfs"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
	"github.com/sqmkit/sqmkit/lab/internal/vm"
)

// runHost boots the guest once for the whole plan and collects the results.
func runHost(repo, out string, k guestKernel, plan []planRun, kernelTests, demo bool) ([]result, error) {
	initrd, err := initramfs.Build(filepath.Join(repo, "lab/.cache"), "/bin/busybox", k.Modules)
	if err != nil {
		return nil, err
	}
	port := 0
	if needsJourney(plan) {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	out, planPath, err := stage(repo, out, plan, kernelTests, demo, port)
	if err != nil {
		return nil, err
	}
	// A scenario takes about 5 minutes, up to 4 more with noisy phases
	// measured again. A sweep adds up to 21 one-way steps per direction and
	// as many bidirectional ones, twice over when a best sat on the edge, each
	// the graded phase (gradeLoad) and its idle baselines, ~44 s: up to 40
	// minutes. The waits for a quiet host take at most settleBudget in each
	// of the run's two passes (secondPass).
	n, timeout := 0, 3*time.Minute+2*settleBudget
	for _, r := range plan {
		k, per := len(r.Backends), 9*time.Minute
		if r.Sweep != nil {
			per += time.Hour
		}
		if r.Mode == "journey" { // one scenario: the browser's part, then a grade
			k, per = 1, journeyWait+10*time.Minute
		}
		if r.Mode == "rpm" { // two grades, two RPM clients and two tunes (rpm.go)
			per = 20 * time.Minute
		}
		if r.Mode == "watch" { // minutes of watching (watch.go)
			per = watchSteady + 4*time.Minute
		}
		n += k
		timeout += time.Duration(k) * per
	}
	unlock, err := lockHost()
	if err != nil {
		return nil, err
	}
	defer unlock()
	fmt.Printf("sqmkit-lab: booting %s (kernel %s, %d scenarios), results in %s\n", filepath.Base(k.Kernel), k.Series, n, out)
	console := filepath.Join(out, "console.log")
	boot := func(planPath string) error {
		return vm.Run(context.Background(), vm.Config{
			Kernel: k.Kernel, Initrd: initrd, Results: out, Modules: k.VMModules, Path: k.TC, Forward: port, ForwardTo: guestJourneyPort,
			Cmd:     []string{filepath.Join(out, "bin", "sqmkit-lab"), "guest", planPath},
			Console: console,
			// the host's steal sampler, beside qemu (package noise), and the
			// journey's browser when the guest is ready for it
			Watch: func(ctx context.Context, pid int) {
				var journey sync.WaitGroup
				defer journey.Wait()
				if port > 0 {
					journey.Add(1)
					go func() {
						defer journey.Done()
						driveJourney(ctx, filepath.Join(out, "journey"), filepath.Join(out, "bin", "browser.test"), port)
					}()
				}
				q, err := noise.NewQEMU(pid)
				for try := 0; err != nil && try < 100; try++ { // qemu starts its vCPU threads after a while
					time.Sleep(50 * time.Millisecond)
					q, err = noise.NewQEMU(pid)
				}
				if err == nil {
					err = noise.Sample(filepath.Join(out, noiseDir), q, ctx.Done())
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "sqmkit-lab: no host noise figures: %v\n", err)
				}
			},
			Timeout: timeout,
			Out:     os.Stdout,
		})
	}
	return guestParts(out, planPath, n, boot)
}

// maxGuests is how many guests one run boots at most: the first, and one
// for each of two kernel panics.
const maxGuests = 3

// guestParts boots guests for the plan at planPath until one ends without
// a kernel panic, or maxGuests have booted, and returns what they proved
// of its n scenarios. A kernel that panics (6.12 under TCG, in the slab
// allocator, in different scenarios each time; 7.2 once while booting, on
// a half-patched instruction) proved nothing of what it had not finished:
// the next guest runs the plan's unfinished entries. Each earlier guest's
// console, summary and journey are kept as *-partN; summary.json holds
// them all (TestGuestParts).
func guestParts(out, planPath string, n int, boot func(plan string) error) ([]result, error) {
	console := filepath.Join(out, "console.log")
	var rs []result
	for part, plan := 1, planPath; ; part++ {
		err := boot(plan)
		why := panicLine(readFile(console))
		more, rerr := guestResults(out, err)
		if why != "" && err == nil && rerr != nil {
			rerr = nil // it panicked before its first entry: no summary
		}
		rs = append(rs, more...)
		if part > 1 {
			writeJSON(filepath.Join(out, "summary.json"), rs)
		}
		if rerr != nil {
			return rs, rerr
		}
		if why == "" {
			return rs, incomplete(rs, n, console)
		}
		for _, l := range oops(readFile(console)) {
			fmt.Println("sqmkit-lab: guest console:", l)
		}
		rest, done, err := resumePlan(out, plan)
		if err != nil {
			return rs, err
		}
		if rest == "" || part == maxGuests {
			return rs, incomplete(rs, n, console)
		}
		fmt.Printf("sqmkit-lab: guest %d's kernel panicked after %d entries of its plan (%s); guest %d runs the rest (guest %[1]d's console, results and journey: console-part%[1]d.log, summary-part%[1]d.json, journey-part%[1]d)\n", part, done, why, part+1)
		for _, f := range []string{"console.log", "summary.json", "journey"} {
			ext := filepath.Ext(f)
			os.Rename(filepath.Join(out, f), filepath.Join(out, fmt.Sprintf("%s-part%d%s", strings.TrimSuffix(f, ext), part, ext)))
		}
		// the next guest counts its own entries from none
		os.Remove(filepath.Join(out, progressFile))
		plan = rest
	}
}

// guestResults reads the results a guest wrote (summary.json); err is its
// run's error, which wins over a missing summary.
func guestResults(out string, err error) ([]result, error) {
	var rs []result
	b, rerr := os.ReadFile(filepath.Join(out, "summary.json"))
	if rerr == nil {
		rerr = json.Unmarshal(b, &rs)
	}
	if err != nil {
		return rs, err
	}
	if rerr != nil {
		return nil, fmt.Errorf("the guest wrote no summary (%v); see %s", rerr, filepath.Join(out, "console.log"))
	}
	return rs, nil
}

// progress is how far a guest got through its plan's entries, written
// after each one (progressFile, in the run's directory).
type progress struct {
	KernelTests bool `json:"kernel_tests"` // they ran (they come first)
	RunsDone    int  `json:"runs_done"`
}

const progressFile = "progress.json"

// resumePlan writes the plan of what a guest did not finish
// (plan-rest.json: the kernel tests unless they ran, and the entries
// after the last it finished) and returns its path and how many entries
// were done; "" when it finished them all.
func resumePlan(out, planPath string) (rest string, done int, err error) {
	var p progress
	var lp labPlan
	if b, err := os.ReadFile(filepath.Join(out, progressFile)); err == nil {
		json.Unmarshal(b, &p)
	}
	b, err := os.ReadFile(planPath)
	if err == nil {
		err = json.Unmarshal(b, &lp)
	}
	if err != nil || p.RunsDone >= len(lp.Runs) {
		return "", p.RunsDone, err
	}
	lp.Runs, lp.KernelTests = lp.Runs[p.RunsDone:], lp.KernelTests && !p.KernelTests
	rest = filepath.Join(out, "plan-rest.json")
	return rest, p.RunsDone, writeJSON(rest, lp)
}

// readFile is path's text, "" when it cannot be read.
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// oopsStart matches the first line of a kernel's report of what crashed.
var oopsStart = regexp.MustCompile(`(Oops|BUG:|general protection fault|double fault|kernel BUG|WARNING:)`)

// oops is what a console says of its kernel's panic, cleaned: of the
// oopsMax lines up to the panic line, those from the first that starts a
// report (the fault, RIP, call trace); the run's output shows them where
// its console cannot be read (a CI log).
func oops(console string) []string {
	var lines []string
	for _, l := range strings.Split(console, "\n") {
		lines = append(lines, strings.TrimSpace(vm.CleanLine(l)))
		if strings.Contains(l, "Kernel panic") {
			break
		}
	}
	lines = lines[max(0, len(lines)-oopsMax):]
	for i, l := range lines {
		if oopsStart.MatchString(l) {
			return lines[i:]
		}
	}
	return lines
}

const oopsMax = 60

// crashSite is where oops says the kernel crashed: the task it ran (CPU,
// PID, Comm) and its first RIP line, without their timestamps.
func crashSite(console string) []string {
	var site []string
	lines := oops(console)
	for _, key := range []string{" Comm: ", "RIP: "} {
		if i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, key) }); i >= 0 {
			site = append(site, vm.KernelText(lines[i]))
		}
	}
	return site
}

// panicLine is a console's first "Kernel panic" line, cleaned; "" without
// one. A panic after the guest's own power-off request (sysrq "o", the
// init's last step) is the shutdown racing the init's exit ("Attempted to
// kill init"), not a crash (TestPanicLine).
func panicLine(console string) string {
	for _, line := range strings.Split(console, "\n") {
		if strings.Contains(line, "sysrq: Power Off") {
			return ""
		}
		if i := strings.Index(line, "Kernel panic"); i >= 0 {
			return strings.TrimSpace(vm.CleanLine(line[i:]))
		}
	}
	return ""
}

// incomplete: a guest that stopped early (its kernel panicked, a scenario's
// error ended the run) leaves fewer results than the plan's n scenarios,
// and proved nothing of the rest (TestIncomplete).
func incomplete(rs []result, n int, console string) error {
	got := 0
	for _, r := range rs {
		if r.Profile != kernelTestsProfile {
			got++
		}
	}
	if got >= n {
		return nil
	}
	why := ""
	c := readFile(console)
	if p := panicLine(c); p != "" {
		why = " (the guest's kernel panicked: " + strings.Join(append([]string{p}, crashSite(c)...), "; ") + ")"
	}
	return fmt.Errorf("the guest stopped after %d of %d scenarios%s; the rest were not run, see %s", got, n, why, console)
}

// stage copies what the guest runs into the run directory out: the
// binaries, sqm-scripts' stand-ins, the profiles, traces and external
// backends (other builds and edits may change them while the guest runs;
// the guest sees the host's root read-only, but not what sits under the
// host's /tmp), and writes the plan. It returns out, absolute.
func stage(repo, out string, plan []planRun, kernelTests, demo bool, journeyPort int) (abs, planPath string, err error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", "", err
	}
	out, _ = filepath.Abs(out)
	bin := filepath.Join(out, "bin")
	if err := snapshotBin(filepath.Join(repo, "bin"), bin); err != nil {
		return "", "", err
	}
	// OpenWrt's userland, built (or found in its cache) before the boot:
	// the guest cannot build it, and reads the cache over 9p
	stackRoot := ""
	if needsStack(plan) {
		out, err := exec.Command("sh", filepath.Join(repo, "scripts/openwrt-stack.sh")).Output()
		if err != nil {
			return "", "", fmt.Errorf("scripts/openwrt-stack.sh: %w", err)
		}
		stackRoot = strings.TrimSpace(string(out))
	}
	// goresponsiveness, built (or found in its cache) by its script, joins
	// the snapshot for rpm mode
	if slices.ContainsFunc(plan, func(r planRun) bool { return r.Mode == "rpm" }) {
		out, err := exec.Command("sh", filepath.Join(repo, "scripts/goresponsiveness.sh")).Output()
		if err != nil {
			return "", "", fmt.Errorf("scripts/goresponsiveness.sh: %w", err)
		}
		b, err := os.ReadFile(strings.TrimSpace(string(out)))
		if err == nil {
			err = os.WriteFile(filepath.Join(bin, "goresponsiveness"), b, 0o755)
		}
		if err != nil {
			return "", "", err
		}
	}
	// Profiles travel with the run for the same reason as bin/.
	plan = slices.Clone(plan)
	for i := range plan {
		plan[i].Backends = slices.Clone(plan[i].Backends)
		b, err := os.ReadFile(plan[i].Profile)
		if err != nil {
			return "", "", err
		}
		plan[i].Profile = filepath.Join(out, "profiles", filepath.Base(plan[i].Profile))
		if err := os.MkdirAll(filepath.Dir(plan[i].Profile), 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(plan[i].Profile, b, 0o644); err != nil {
			return "", "", err
		}
	}
	// So do traces.
	for i := range plan {
		if plan[i].Trace == "" {
			continue
		}
		// a recording is a pair, "A.down,A.up": each file travels
		var copied []string
		for _, f := range strings.Split(plan[i].Trace, ",") {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", "", err
			}
			to := filepath.Join(out, "traces", filepath.Base(f))
			os.MkdirAll(filepath.Dir(to), 0o755)
			if err := os.WriteFile(to, b, 0o644); err != nil {
				return "", "", err
			}
			copied = append(copied, to)
		}
		plan[i].Trace = strings.Join(copied, ",")
	}
	// External backends travel with the run too: the guest sees the host's
	// root read-only, but not what sits under the host's /tmp.
	for i := range plan {
		for j, b := range plan[i].Backends {
			label, dir, ok := strings.Cut(strings.TrimPrefix(b, extPrefix), "=")
			if !strings.HasPrefix(b, extPrefix) || !ok {
				continue
			}
			dir, _ = filepath.Abs(dir)
			snap := filepath.Join(out, "ext", label)
			os.RemoveAll(snap)
			if err := os.CopyFS(snap, os.DirFS(dir)); err != nil {
				return "", "", fmt.Errorf("snapshot of %s: %w", b, err)
			}
			if err := prepareExt(repo, snap); err != nil {
				return "", "", fmt.Errorf("%s: %w", b, err)
			}
			plan[i].Backends[j] = extPrefix + label + "=" + snap
		}
	}
	commit, _ := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	lp := labPlan{Bin: bin, Stack: stackRoot, JourneyPort: journeyPort, Out: out, Commit: strings.TrimSpace(string(commit)), Runs: plan, KernelTests: kernelTests, Demo: demo}
	planPath = filepath.Join(out, "plan.json")
	if err := writeJSON(planPath, lp); err != nil {
		return "", "", err
	}
	return out, planPath, nil
}

// prepareExt runs an external backend's prepare program, if it has one, on
// the host in the repository with the snapshot as its argument: what the
// guest cannot fetch or unpack (lab/ext/cake-autorate) goes there.
func prepareExt(repo, snap string) error {
	prog := filepath.Join(snap, "prepare")
	if _, err := os.Stat(prog); err != nil {
		return nil
	}
	cmd := exec.Command(prog, snap)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("prepare: %w: %s", err, lastLine(string(out)))
	}
	return nil
}

// snapshotBin copies the programs the guest runs into the run directory.
// The lab binary itself is required; tcshim only matters for nss.
func snapshotBin(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"sqmkit-lab", "sqmkit", "sqmkit-router", "tcshim", "browser.test"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			if (name == "tcshim" || name == "browser.test") && os.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("%w: run `make build` first", err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o755); err != nil {
			return err
		}
	}
	tests, _ := filepath.Glob(filepath.Join(from, "labtests", "*.test"))
	if len(tests) > 0 {
		if err := os.MkdirAll(filepath.Join(to, "labtests"), 0o755); err != nil {
			return err
		}
	}
	for _, t := range tests {
		b, err := os.ReadFile(t)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, "labtests", filepath.Base(t)), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// hres says whether the guest's timers are high-resolution: without it a
// sleep ends on a jiffy, and the noise gauge would read that as delay.
func hres() string {
	b, _ := os.ReadFile("/proc/timer_list")
	n := len(regexp.MustCompile(`hres_active\s*:\s*1`).FindAll(b, -1))
	return fmt.Sprintf("high-resolution timers on %d CPUs", n)
}

// hostLock serialises lab runs on one host: two guests on a 2-core machine
// each measure the other's CPU load as latency.
const hostLock = "/run/lock/sqmkit-lab.lock"

func lockHost() (unlock func(), err error) {
	f, err := os.OpenFile(hostLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab lock: %w", err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		fmt.Printf("sqmkit-lab: another lab run holds %s; waiting for it to finish\n", hostLock)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lab lock %s: %w", hostLock, err)
		}
	}
	return func() { f.Close() }, nil
}

// needsStack says whether a plan boots OpenWrt's userland in the guest.
func needsStack(plan []planRun) bool {
	for _, r := range plan {
		if r.Mode == "journey" || r.Mode == "openwrt-pppoe" {
			return true
		}
		for _, b := range r.Backends {
			if strings.HasPrefix(b, qosPrefix) {
				return true
			}
		}
	}
	return false
}

// needsJourney says whether a plan holds the journey (a browser on the
// host, through a port QEMU forwards).
func needsJourney(plan []planRun) bool {
	return slices.ContainsFunc(plan, func(r planRun) bool { return r.Mode == "journey" })
}

// guestJourneyPort is journeyPort as a number.
const guestJourneyPort = 8080

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// driveJourney waits for the guest's ready.json in dir, runs the browser's
// part (openwrt/browser's TestJourney, built into bin/browser.test) against
// the forwarded port, and writes done.json with its outcome, which the
// guest waits for. When the guest is gone (ctx), so is the browser, and
// no done.json is written: a panicked guest's browser must not answer the
// next guest's journey, in the same directory and port
// (TestDriveJourneyStops).
func driveJourney(ctx context.Context, dir, browser string, port int) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if _, err := os.Stat(filepath.Join(dir, "ready.json")); err == nil {
			break
		}
	}
	fmt.Println("sqmkit-lab: the guest's OpenWrt is up; headless Chromium on the host takes the journey through LuCI")
	log, err := os.Create(filepath.Join(dir, "browser.log"))
	done := map[string]any{"ok": false}
	if err == nil {
		c := exec.CommandContext(ctx, browser, "-test.run", "^TestJourney$", "-test.v", "-test.timeout", "30m")
		c.Env = append(os.Environ(), "SQMKIT_JOURNEY="+dir, fmt.Sprintf("SQMKIT_JOURNEY_URL=http://127.0.0.1:%d", port))
		c.Dir = filepath.Dir(browser)
		c.Stdout, c.Stderr = log, log
		err = c.Run()
		log.Close()
	}
	if ctx.Err() != nil {
		return
	}
	var steps map[string]any
	if b, rerr := os.ReadFile(filepath.Join(dir, "browser.json")); rerr == nil && json.Unmarshal(b, &steps) == nil {
		done = steps
	}
	if err != nil {
		done["ok"] = false
		if done["error"] == nil || done["error"] == "" {
			done["error"] = fmt.Sprintf("%s: %v", filepath.Base(browser), err)
		}
	}
	b, _ := json.Marshal(done)
	os.WriteFile(filepath.Join(dir, "done.json"), b, 0o644)
}
