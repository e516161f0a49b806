// Command sqmkit-lab proves sqmkit on a real kernel: it boots the Debian
// guest kernel under QEMU with the host's root filesystem, builds a
// client ⇄ router ⇄ modem ⇄ server lab in network namespaces whose modem
// is a bloated bottleneck, and grades the link unshaped and with each
// sqmkit backend. See lab/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/initramfs"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
	"github.com/sqmkit/sqmkit/lab/internal/vm"
)

// ciPlan is what `make test` runs in the lab: every backend on cable, nss
// on the worked example's VDSL (PPPoE over VLAN 7), the OpenWrt package's
// cake script the way sqm-scripts runs it, the hotplug scenario, and one
// tune: cake on cable, the default backend on the profile most users have,
// over IPv6 (make lab's tunes run over IPv4), ~5 minutes of CI (a sweep
// beside it would add 3 more per direction searched, so make test holds
// tune to the floor of againstLine and make lab's tunes, each beside a
// sweep (allPlan), hold it to the acceptance).
var ciPlan = []planRun{
	{Profile: "cable", Backends: []string{unshaped, "fq_codel", "cake", "nss", "qos:sqmkit-cake.qos"}},
	{Profile: "vdsl-pppoe-vlan7", Backends: []string{unshaped, "nss"}},
	{Profile: "vdsl-pppoe-vlan7", Backends: []string{"cake"}, Mode: "hotplug"},
	{Profile: "cable", Backends: []string{"cake"}, Mode: "tune", IPv6: true},
}

// allSweep is the sweep beside each of make lab's tunes: 70 %, not the
// 80 % a sweep starts from by hand, because nss on ATM counts no cells and
// its best pair sits at 79 / 76 % of adsl-atm's sync rate (73c71bd); with
// a direction ending after 3 passing steps, the lower end costs nothing
// where the knee is higher.
var allSweep = sweepSpec{From: 70, To: 100, Stop: 3}

// allPlan is make lab's matrix: every profile × every backend, the .qos
// scripts and lab/ext's shapers on cable, the hotplug scenario, and tune's
// acceptance (sqmkit tune beside a sweep) on every profile × sqmkit's
// backends, each about 15-20 minutes.
func allPlan(profiles []string, repo string) []planRun {
	var plan []planRun
	for _, n := range profiles {
		plan = append(plan, planRun{Profile: n, Backends: allBackends})
	}
	cable := slices.Clone(qosBackends)
	for _, e := range extExamples {
		cable = append(cable, extPrefix+e+"="+filepath.Join(repo, "lab/ext", e))
	}
	plan = append(plan, planRun{Profile: "cable", Backends: cable},
		planRun{Profile: "vdsl-pppoe-vlan7", Backends: sqmkitBackends, Mode: "hotplug"})
	for _, n := range profiles {
		sw := allSweep
		plan = append(plan, planRun{Profile: n, Backends: sqmkitBackends, Mode: "tune", Sweep: &sw})
	}
	return plan
}

// qosBackends are the OpenWrt package's .qos scripts.
var qosBackends = []string{"qos:sqmkit-nss.qos", "qos:sqmkit-cake.qos", "qos:sqmkit-fq_codel.qos"}

// extExamples are the external backends in lab/ext: "why not just a shaper
// script", in numbers, on cable in `all`.
var extExamples = []string{"wondershaper-style", "htb-fifo"}

// labPlan is what the host hands the guest (plan.json in the run dir).
type labPlan struct {
	Bin string `json:"bin"` // snapshot of bin/: other builds may replace bin/ while the guest runs
	// OpenWrt is the snapshot of openwrt/test's sqm-scripts stand-ins, for
	// the .qos scenarios.
	OpenWrt string    `json:"openwrt"`
	Out     string    `json:"out"`
	Commit  string    `json:"commit"`
	Runs    []planRun `json:"runs"`
	// KernelTests runs bin/labtests/*.test (TestLab*) before the scenarios.
	KernelTests bool `json:"kernel_tests"`
}

type planRun struct {
	Profile  string   `json:"profile"` // path
	Backends []string `json:"backends"`
	// Mode is what the guest does with them: "" grades each backend,
	// "hotplug" runs the OpenWrt hotplug scenario (hotplug.go), "tune"
	// sqmkit tune before the grade (tune.go), "sweep" the exhaustive
	// measurement alone.
	Mode string `json:"mode,omitempty"`
	// Sweep, in tune and sweep modes: the range and its early stop.
	Sweep *sweepSpec `json:"sweep,omitempty"`
	// Kept, in a second pass of tune mode (secondPass): the first pass's
	// sweep per backend, measured clean, which the tune is checked against
	// instead of sweeping again.
	Kept map[string]*swept `json:"-"`
	// AB, in ab mode: the rates, the instruments and the rounds (ab.go).
	AB *abSpec `json:"ab,omitempty"`
	// IPv6, in tune mode: sqmkit tune reaches the server over IPv6.
	IPv6 bool `json:"ipv6,omitempty"`
	// Trace, in trace mode: the capacity trace file; Backends are then
	// the controllers. Seconds, when set, replays only its first seconds.
	Trace   string `json:"trace,omitempty"`
	Seconds int    `json:"seconds,omitempty"`
}

// ciTrace is `ci`'s autorate run: the first minute of lte (a capacity
// that moves every 100 ms), sqmkit's controller alone, graded by
// traceChecks. A minute, not the whole trace: 3.5 minutes per controller
// of the CI's budget; the first minute already holds lte's swings.
func ciTrace(repo string) planRun {
	return planRun{Profile: "cable", Backends: []string{ctlSqmkit}, Mode: "trace", Trace: filepath.Join(repo, "lab/traces/lte.trace"), Seconds: 60}
}

const usageText = `Usage: sqmkit-lab COMMAND

  demo   cable unshaped vs cake, both grades side by side (make demo)
  ci     cable × {none, fq_codel, cake, nss, qos:sqmkit-cake.qos}, vdsl-pppoe-vlan7 × {none, nss},
         the hotplug scenario with cake, tune on cable × cake over IPv6, lte's first minute under sqmkit
         autorate (make lab-ci, make test)
  all    every profile × every backend, the .qos scripts and lab/ext's shapers on cable, hotplug
         with every backend; prints one table per profile and rewrites README.md's results (make lab)
  run    --profile NAME|PATH [--backends none,cake,qos:sqmkit-cake.qos,ext:NAME=DIR,...] [--out DIR]
  report RESULTS-DIR [--readme FILE]  the tables of a finished run again (and into FILE's results)
  hotplug [--profile PPPOE-PROFILE] [--backends cake,...]  the OpenWrt hotplug script on a real PPPoE session
  tune   --profile NAME|PATH [--backends cake,fq_codel,nss] [--sweep] [-6]  sqmkit tune --write from the router, then
         the full grade at the rates it wrote; --sweep measures the sweep first and checks tune against it;
         -6 tunes over IPv6 (not on PPPoE profiles)
  sweep  --profile NAME|PATH [--backends cake,fq_codel,nss] [--from 80] [--to 100] [--stop N]  every shaper rate
         from FROM to TO percent of the line in 1 % steps per direction: the best A+ rate (--stop N: a direction
         ends after N passing steps in a row)
  ab     --profile NAME|PATH --backend B --rates DOWN/UP [--arms step,confirm] [--rounds 8]  the shaper held at
         one pair of rates, the bidirectional phase measured by each arm in turn, round after round (client,
         router: the grade's 30 s phase forwarded or the router's own; step, long, confirm: tune's), with the
         router's and the modem's queues sampled
  trace  --trace NAME|PATH [--profile cable] [--controllers none,static-min,static-mean,sqmkit,sqmkit-reflectors,ext:NAME=DIR]
         replay a capacity trace (lab/traces) on the modem with each controller under a bidirectional load:
         utilisation, added delay per direction, CPU and processes of the controller
  traces write lab/traces/*.trace from their generator and seeds (lab/internal/trace)
  kerneltests  only the Go tests that need the guest kernel (TestLab* in bin/labtests/*.test)
  guest  PLAN.json (inside the VM; started by the others)

Results go to lab/results/<time>-<name>/ (one result.json per scenario, plots,
logs, console.log); the exit status is non-zero when any scenario fails.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usageText)
		os.Exit(2)
	}
	// The guest-side commands come first: in the guest only the run
	// directory is reachable (a checkout under /tmp sits below the guest's
	// own tmpfs), so they must not look for the repository.
	switch os.Args[1] {
	case "guest":
		if len(os.Args) != 3 {
			fatal(fmt.Errorf("usage: sqmkit-lab guest PLAN.json"))
		}
		os.Exit(runGuest(os.Args[2]))
	case "replay":
		if len(os.Args) != 4 {
			fatal(fmt.Errorf("usage: sqmkit-lab replay PROFILE TRACE (in the modem namespace; started by trace)"))
		}
		if err := replay(os.Args[2], os.Args[3]); err != nil {
			fatal(err)
		}
		return
	case pppdKernelName:
		if len(os.Args) < 3 {
			fatal(fmt.Errorf("usage: sqmkit-lab %s LOG PPPD-ARGS... (started by pppoe-server -q)", pppdKernelName))
		}
		runPPPDWrapper(os.Args[2], os.Args[3:])
		return
	}
	repo, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	if os.Args[1] == "report" {
		os.Exit(report(os.Args[2:]))
	}
	if os.Args[1] == "traces" {
		if err := writeTraces(filepath.Join(repo, "lab/traces")); err != nil {
			fatal(err)
		}
		return
	}
	profiles := filepath.Join(repo, "lab/profiles")
	var plan []planRun
	name := os.Args[1]
	out := ""
	kernelTests := name == "ci" || name == "all" || name == "kerneltests"
	switch name {
	case "kerneltests": // the kernel tests alone, no scenario
	case "demo":
		plan = []planRun{{Profile: "cable", Backends: []string{unshaped, "cake"}}}
	case "ci":
		plan = append(slices.Clone(ciPlan), ciTrace(repo))
	case "all":
		names, err := profile.List(profiles)
		if err != nil {
			fatal(err)
		}
		plan = allPlan(names, repo)
	case "trace":
		fs := flag.NewFlagSet("sqmkit-lab trace", flag.ExitOnError)
		prof := fs.String("profile", "cable", "profile whose framing and buffer the trace runs on (its rates become the trace's)")
		tr := fs.String("trace", "", "trace name (lab/traces/NAME.trace) or path")
		ctls := fs.String("controllers", strings.Join(traceControllers, ","), "comma-separated: "+strings.Join(traceControllers, ", ")+", ext:NAME=DIR (an external controller: DIR/start launches it, DIR/stop ends it; lab/README.md)")
		fs.StringVar(&out, "out", "", "results directory (default lab/results/<time>-trace-<name>)")
		fs.Parse(os.Args[2:])
		if *tr == "" {
			fatal(fmt.Errorf("--trace: name one of lab/traces (lte, starlink, cable-evening, steady) or a file"))
		}
		path := *tr
		if !strings.ContainsRune(path, '/') {
			path = filepath.Join(repo, "lab/traces", path+".trace")
		}
		if _, err := os.Stat(path); err != nil {
			fatal(fmt.Errorf("--trace: %w", err))
		}
		cs := strings.Split(*ctls, ",")
		for _, c := range cs {
			if !slices.Contains(traceControllers, c) && !strings.HasPrefix(c, extPrefix) {
				fatal(fmt.Errorf("--controllers: %q: want %s or ext:NAME=DIR", c, strings.Join(traceControllers, ", ")))
			}
			if strings.HasPrefix(c, extPrefix) {
				if _, err := parseBackend(c); err != nil {
					fatal(fmt.Errorf("--controllers: %w", err))
				}
			}
		}
		abs, _ := filepath.Abs(path)
		plan = []planRun{{Profile: *prof, Backends: cs, Mode: "trace", Trace: abs}}
		name = "trace-" + strings.TrimSuffix(filepath.Base(path), ".trace")
	case "ab":
		fs := flag.NewFlagSet("sqmkit-lab ab", flag.ExitOnError)
		prof := fs.String("profile", "cable", "profile name (lab/profiles/NAME.conf) or path to a profile file")
		backend := fs.String("backend", "cake", "one of sqmkit's backends: "+strings.Join(sqmkitBackends, ", "))
		rates := fs.String("rates", "", "the shaper's `DOWN/UP` rates in kbit/s, held for the whole run")
		arms := fs.String("arms", "step,confirm", "comma-separated instruments, each a bidirectional phase, run in this order every round: "+armNames())
		sp := abSpec{}
		fs.IntVar(&sp.Rounds, "rounds", 8, "how many times each arm runs")
		fs.StringVar(&out, "out", "", "results directory (default lab/results/<time>-<profile>)")
		fs.Parse(os.Args[2:])
		if _, err := fmt.Sscanf(*rates, "%d/%d", &sp.Down, &sp.Up); err != nil {
			fatal(fmt.Errorf("--rates %q: want DOWN/UP in kbit/s, e.g. 38800/7760", *rates))
		}
		sp.Arms = strings.Split(*arms, ",")
		if err := sp.check(); err != nil {
			fatal(err)
		}
		if !slices.Contains(sqmkitBackends, *backend) {
			fatal(fmt.Errorf("--backend %q: want one of %s", *backend, strings.Join(sqmkitBackends, ", ")))
		}
		plan = []planRun{{Profile: *prof, Backends: []string{*backend}, Mode: "ab", AB: &sp}}
		name = *prof
	case "run", "hotplug", "tune", "sweep":
		fs := flag.NewFlagSet("sqmkit-lab "+name, flag.ExitOnError)
		defProfile, defBackends, mode := "cable", allBackends, ""
		switch name {
		case "hotplug":
			defProfile, defBackends, mode = "vdsl-pppoe-vlan7", sqmkitBackends, "hotplug"
		case "tune", "sweep":
			defBackends, mode = sqmkitBackends, name
		}
		prof := fs.String("profile", defProfile, "profile name (lab/profiles/NAME.conf) or path to a profile file")
		backends := fs.String("backends", strings.Join(defBackends, ","), "comma-separated: none (unshaped), fq_codel, cake, nss, qos:sqmkit-BACKEND.qos (the OpenWrt package's script, sqm-scripts' way), ext:NAME=DIR (an external shaper: DIR/start, DIR/stop; lab/README.md)")
		fs.StringVar(&out, "out", "", "results directory (default lab/results/<time>-<profile>)")
		sp := sweepSpec{From: 80, To: 100}
		withSweep := name == "sweep"
		v6 := false
		if name == "tune" {
			fs.BoolVar(&withSweep, "sweep", false, "sweep first (--from, --to, --stop) and check tune's rates against the sweep's best")
			fs.BoolVar(&v6, "6", false, "tune over IPv6 (the WAN and server links get IPv6; not on PPPoE profiles); the sweep and the grade stay IPv4")
		}
		if name == "tune" || name == "sweep" {
			fs.IntVar(&sp.From, "from", sp.From, "sweep from `PCT` of the line")
			fs.IntVar(&sp.To, "to", sp.To, "sweep up to `PCT` of the line")
			fs.IntVar(&sp.Stop, "stop", 0, "end a direction after `N` passing steps in a row (0: every step)")
		}
		fs.Parse(os.Args[2:])
		if withSweep && (sp.From <= 0 || sp.To < sp.From || sp.Stop < 0) {
			fatal(fmt.Errorf("--from %d --to %d --stop %d: want 0 < from <= to and stop >= 0", sp.From, sp.To, sp.Stop))
		}
		bs := strings.Split(*backends, ",")
		for _, b := range bs {
			if _, err := parseBackend(b); err != nil && b != unshaped {
				fatal(fmt.Errorf("--backends: %w", err))
			}
		}
		plan = []planRun{{Profile: *prof, Backends: bs, Mode: mode, IPv6: v6}}
		if withSweep {
			plan[0].Sweep = &sp
		}
		name = *prof
	case "-h", "--help", "help":
		fmt.Print(usageText)
		return
	default:
		fmt.Fprintf(os.Stderr, "sqmkit-lab: unknown command %q\n\n%s", name, usageText)
		os.Exit(2)
	}
	// Resolve profiles on the host so a bad name fails before the boot.
	for i := range plan {
		p, err := profile.Load(profiles, plan[i].Profile)
		if err != nil {
			fatal(err)
		}
		if plan[i].IPv6 && p.Encap.PPPoE {
			fatal(fmt.Errorf("-6: profile %s runs PPPoE, whose lab session negotiates no IPv6CP; tune over IPv6 on cable, fiber or adsl-atm", p.Name))
		}
		if !strings.ContainsRune(plan[i].Profile, '/') {
			plan[i].Profile = filepath.Join(profiles, plan[i].Profile+".conf")
		}
		plan[i].Profile, _ = filepath.Abs(plan[i].Profile)
		if name == plan[0].Profile {
			name = p.Name
		}
	}
	if out == "" {
		out = filepath.Join(repo, "lab/results", time.Now().Format("20060102-150405")+"-"+filepath.Base(name))
	}
	rs, err := runHost(repo, out, plan, kernelTests)
	if err != nil {
		fatal(err)
	}
	if os.Args[1] == "demo" {
		printDemo(rs)
	}
	printTable(os.Stdout, rs)
	if os.Args[1] == "all" {
		if err := updateReadme(filepath.Join(repo, "README.md"), rs); err != nil {
			fmt.Fprintln(os.Stderr, "sqmkit-lab:", err)
		} else {
			fmt.Println("\nREADME.md: results section rewritten from this run")
		}
	}
	fmt.Printf("\nresults: %s\n", out)
	os.Exit(exitStatus(rs))
}

// exitStatus is 1 when any scenario did not pass (a recorded limitation
// passes; an inconclusive one does not: nothing was proven). An unproven
// one passes: every bar it could measure was met, and its summary and
// report name the bar it could not (noisegate.go, minStarvedGoodput).
func exitStatus(rs []result) int {
	for _, r := range rs {
		if r.Status == "fail" || r.Status == "error" || r.Status == "inconclusive" {
			return 1
		}
	}
	return 0
}

// report prints a finished run's tables again, optionally into a README.
func report(args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab report", flag.ExitOnError)
	readme := fs.String("readme", "", "rewrite the results section of this `FILE` (README.md)")
	// flags may follow the directory, as the usage shows
	var pos []string
	for rest := args; ; {
		fs.Parse(rest)
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		fatal(fmt.Errorf("usage: sqmkit-lab report RESULTS-DIR [--readme FILE]"))
	}
	var rs []result
	b, err := os.ReadFile(filepath.Join(pos[0], "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &rs)
	}
	if err != nil {
		fatal(err)
	}
	printTable(os.Stdout, rs)
	if *readme != "" {
		if err := updateReadme(*readme, rs); err != nil {
			fatal(err)
		}
	}
	return exitStatus(rs)
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

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sqmkit-lab:", err)
	os.Exit(1)
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

// repoRoot is the directory with go.mod above the binary (bin/sqmkit-lab)
// or, for `go run`, above the working directory.
func repoRoot() (string, error) {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for ; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "lab/profiles")); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("cannot find the sqmkit repository (a parent with lab/profiles) from the binary or working directory")
}

// runHost boots the guest once for the whole plan and collects the results.
func runHost(repo, out string, plan []planRun, kernelTests bool) ([]result, error) {
	kernel, modDir, err := vm.FindKernel()
	if err != nil {
		return nil, err
	}
	initrd, err := initramfs.Build(filepath.Join(repo, "lab/.cache"), "/bin/busybox", modDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	out, _ = filepath.Abs(out)
	bin := filepath.Join(out, "bin")
	if err := snapshotBin(filepath.Join(repo, "bin"), bin); err != nil {
		return nil, err
	}
	// sqm-scripts' stand-ins (the package's own files travel inside the
	// lab binary); no Go file, so `go test ./...` never finds a copy under
	// lab/results.
	openwrt := filepath.Join(out, "openwrt")
	os.RemoveAll(openwrt)
	if err := os.CopyFS(filepath.Join(openwrt, "sqm-scripts"), os.DirFS(filepath.Join(repo, "openwrt", "test", "sqm-scripts"))); err != nil {
		return nil, fmt.Errorf("snapshot of openwrt/test/sqm-scripts: %w", err)
	}
	// Profiles travel with the run for the same reason as bin/.
	plan = slices.Clone(plan)
	for i := range plan {
		plan[i].Backends = slices.Clone(plan[i].Backends)
		b, err := os.ReadFile(plan[i].Profile)
		if err != nil {
			return nil, err
		}
		plan[i].Profile = filepath.Join(out, "profiles", filepath.Base(plan[i].Profile))
		if err := os.MkdirAll(filepath.Dir(plan[i].Profile), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(plan[i].Profile, b, 0o644); err != nil {
			return nil, err
		}
	}
	// So do traces.
	for i := range plan {
		if plan[i].Trace == "" {
			continue
		}
		b, err := os.ReadFile(plan[i].Trace)
		if err != nil {
			return nil, err
		}
		plan[i].Trace = filepath.Join(out, "traces", filepath.Base(plan[i].Trace))
		os.MkdirAll(filepath.Dir(plan[i].Trace), 0o755)
		if err := os.WriteFile(plan[i].Trace, b, 0o644); err != nil {
			return nil, err
		}
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
				return nil, fmt.Errorf("snapshot of %s: %w", b, err)
			}
			plan[i].Backends[j] = extPrefix + label + "=" + snap
		}
	}
	commit, _ := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	lp := labPlan{Bin: bin, OpenWrt: openwrt, Out: out, Commit: strings.TrimSpace(string(commit)), Runs: plan, KernelTests: kernelTests}
	planPath := filepath.Join(out, "plan.json")
	if err := writeJSON(planPath, lp); err != nil {
		return nil, err
	}
	// A scenario takes about 5 minutes, up to 4 more with noisy phases
	// measured again. A sweep adds up to 21 one-way steps per direction and
	// as many bidirectional ones, twice over when a best sat on the edge,
	// each the graded phase (gradeLoad) and its idle baselines, ~44 s
	// (cable × nss at 18a4893 ran 53 steps; at that count a sweep takes
	// 40 minutes). The waits for a quiet host take at most
	// settleBudget in each of the run's two passes (secondPass).
	n, timeout := 0, 3*time.Minute+2*settleBudget
	for _, r := range plan {
		n += len(r.Backends)
		per := 9 * time.Minute
		if r.Sweep != nil {
			per += time.Hour
		}
		timeout += time.Duration(len(r.Backends)) * per
	}
	unlock, err := lockHost()
	if err != nil {
		return nil, err
	}
	defer unlock()
	fmt.Printf("sqmkit-lab: booting %s (%d scenarios), results in %s\n", filepath.Base(kernel), n, out)
	err = vm.Run(context.Background(), vm.Config{
		Kernel: kernel, Initrd: initrd, Results: out,
		Cmd:     []string{filepath.Join(bin, "sqmkit-lab"), "guest", planPath},
		Console: filepath.Join(out, "console.log"),
		// the host's steal sampler, beside qemu (package noise)
		Watch: func(pid int, stop <-chan struct{}) {
			q, err := noise.NewQEMU(pid)
			for try := 0; err != nil && try < 100; try++ { // qemu starts its vCPU threads after a while
				time.Sleep(50 * time.Millisecond)
				q, err = noise.NewQEMU(pid)
			}
			if err == nil {
				err = noise.Sample(filepath.Join(out, noiseDir), q, stop)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sqmkit-lab: no host noise figures: %v\n", err)
			}
		},
		Timeout: timeout,
		Out:     os.Stdout,
	})
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

// snapshotBin copies the programs the guest runs into the run directory.
// The lab binary itself is required; tcshim only matters for nss.
func snapshotBin(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"sqmkit-lab", "sqmkit", "sqmkit-router", "tcshim"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			if name == "tcshim" && os.IsNotExist(err) {
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

// runGuest is PID 1's child inside the VM: load modules, run every
// profile's scenarios, write summary.json.
func runGuest(planPath string) int {
	say := func(format string, a ...any) {
		fmt.Printf("lab: "+format+"\n", a...)
	}
	b, err := os.ReadFile(planPath)
	if err != nil {
		say("%v", err)
		return 1
	}
	var lp labPlan
	if err := json.Unmarshal(b, &lp); err != nil {
		say("%s: %v", planPath, err)
		return 1
	}
	sh := &shell{log: io.Discard}
	for _, m := range guestModules {
		if _, err := sh.run("", "modprobe", m); err != nil {
			say("%v", err)
			return 1
		}
	}
	g := &guest{tools: probeTools(lp.Bin), commit: lp.Commit, out: lp.Out, openwrt: lp.OpenWrt, say: say, setUp: map[string]bool{}}
	say("clocksource %s, %s", readTrim("/sys/devices/system/clocksource/clocksource0/current_clocksource"), hres())
	g.events = listenProcesses(say)
	if r, err := openNoise(lp.Out); err != nil {
		say("no host noise figures: %v; phases are graded without them", err)
	} else {
		g.noise, g.settler = r, newSettler(r)
	}
	say("sqmkit: start/stop %v, test %v, serve %v, doctor %v", g.tools.start, g.tools.test, g.tools.serve, g.tools.doc)
	var rs []result
	if lp.KernelTests {
		r := result{Profile: "kernel", Backend: "TestLab", Date: time.Now().UTC().Format(time.RFC3339), Commit: lp.Commit,
			Status: "pass", Dir: filepath.Join(lp.Out, "kerneltests")}
		if err := runKernelTests(filepath.Join(lp.Bin, "labtests"), lp.Out); err != nil {
			r.Status, r.Error = "fail", err.Error()
		}
		say("kernel tests: %s %s", r.Status, r.Error)
		rs = append(rs, r)
		writeJSON(filepath.Join(lp.Out, "summary.json"), rs)
	}
	byRun := make([][]result, len(lp.Runs)) // each run's results, for secondPass
	all := func() []result {
		out := slices.Clone(rs)
		for _, got := range byRun {
			out = append(out, got...)
		}
		return out
	}
	for i, run := range lp.Runs {
		got, err := g.runPlan(run)
		if err != nil {
			say("%v", err)
			return 1
		}
		byRun[i] = got
		writeJSON(filepath.Join(lp.Out, "summary.json"), all())
	}
	if g.secondPass(lp.Runs, byRun, g.runPlan) {
		writeJSON(filepath.Join(lp.Out, "summary.json"), all())
	}
	return 0
}

// runPlan runs one entry of the lab's plan: a result per backend, in
// run.Backends' order (a trace run's may have fewer, when its trace does
// not read).
func (g *guest) runPlan(run planRun) ([]result, error) {
	p, err := profile.Load("", run.Profile)
	if err != nil {
		return nil, err
	}
	switch run.Mode {
	case "hotplug":
		return g.hotplugRuns(p, run.Backends), nil
	case "tune":
		return g.profileRuns(p, run.Backends, run.Mode, func(t *topo, b string, r *result) error {
			return g.tuneScenario(t, b, r, run.Sweep, run.Kept[b], run.IPv6)
		}), nil
	case "sweep":
		return g.profileRuns(p, run.Backends, run.Mode, func(t *topo, b string, r *result) error { return g.sweepScenario(t, b, r, *run.Sweep) }), nil
	case "ab":
		return g.profileRuns(p, run.Backends, run.Mode, func(t *topo, b string, r *result) error { return g.abScenario(t, b, r, *run.AB) }), nil
	case "trace":
		return g.traceRuns(p, run.Profile, run.Trace, run.Seconds, run.Backends), nil
	}
	return g.profileRuns(p, run.Backends, "", nil), nil
}
