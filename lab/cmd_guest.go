package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

const guestUsage = "  guest  PLAN.json (inside the VM; started by the others)\n"

func runGuestCmd(_ string, args []string) int {
	if len(args) != 1 {
		fatal(fmt.Errorf("usage: sqmkit-lab guest PLAN.json"))
	}
	return runGuest(args[0])
}

// runReplay replays a trace in the modem namespace (started by trace).
func runReplay(_ string, args []string) int {
	if len(args) != 4 {
		fatal(fmt.Errorf("usage: sqmkit-lab replay PROFILE TRACE SECONDS SLOT_MS (in the modem namespace; started by trace)"))
	}
	seconds, err1 := strconv.Atoi(args[2])
	slot, err2 := strconv.Atoi(args[3])
	if err1 != nil || err2 != nil {
		fatal(fmt.Errorf("replay: SECONDS %q and SLOT_MS %q: want whole numbers", args[2], args[3]))
	}
	if err := replay(args[0], args[1], seconds, slot); err != nil {
		fatal(err)
	}
	return 0
}

// runPPPD is the pppd wrapper pppoe-server starts (pppdwrap.go).
func runPPPD(_ string, args []string) int {
	if len(args) < 1 {
		fatal(fmt.Errorf("usage: sqmkit-lab %s LOG PPPD-ARGS... (started by pppoe-server -q)", pppdKernelName))
	}
	runPPPDWrapper(args[0], args[1:])
	return 0
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
	g := &guest{tools: probeTools(lp.Bin), commit: lp.Commit, kernel: readTrim("/proc/sys/kernel/osrelease"), out: lp.Out, stack: lp.Stack, say: say, setUp: map[string]bool{}, gate: strict}
	say("clocksource %s, %s", readTrim("/sys/devices/system/clocksource/clocksource0/current_clocksource"), hres())
	g.events = listenProcesses(say)
	if r, err := openNoise(lp.Out); err != nil {
		say("no host noise figures: %v; phases are graded without them", err)
	} else {
		g.noise, g.settler = r, newSettler(r)
		if lp.Demo {
			g.demoGate()
		}
	}
	say("sqmkit: start/stop %v, test %v, serve %v, doctor %v", g.tools.start, g.tools.test, g.tools.serve, g.tools.doc)
	var rs []result
	if lp.KernelTests {
		r := result{Profile: kernelTestsProfile, Backend: "TestLab", Date: time.Now().UTC().Format(time.RFC3339), Commit: lp.Commit,
			Status: "pass", Dir: filepath.Join(lp.Out, "kerneltests")}
		if err := runKernelTests(filepath.Join(lp.Bin, "labtests"), lp.Out); err != nil {
			r.Status, r.Error = "fail", err.Error()
		}
		say("kernel tests: %s %s", r.Status, r.Error)
		rs = append(rs, r)
		writeJSON(filepath.Join(lp.Out, "summary.json"), rs)
		writeJSON(filepath.Join(lp.Out, progressFile), progress{KernelTests: true})
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
		writeJSON(filepath.Join(lp.Out, progressFile), progress{KernelTests: lp.KernelTests, RunsDone: i + 1})
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
		return g.traceRuns(p, run.Profile, run), nil
	case "rpm":
		return g.profileRuns(p, run.Backends, run.Mode, func(t *topo, b string, r *result) error { return g.rpmScenario(t, b, r) }), nil
	case "watch":
		return g.profileRuns(p, run.Backends, run.Mode, func(t *topo, b string, r *result) error { return g.watchScenario(t, b, r) }), nil
	case "journey":
		return g.journey(p), nil
	case "openwrt-pppoe":
		return g.owrtPPPoE(p, run.Backends), nil
	}
	return g.profileRuns(p, run.Backends, "", nil), nil
}
