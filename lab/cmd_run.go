package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

const (
	demoUsage = "  demo   cable unshaped vs cake, both grades side by side (make demo)\n"
	ciUsage   = `  ci     cable × {none, fq_codel, cake}, vdsl-pppoe-vlan7 × {none, nss}, the hotplug scenario with
         cake, tune on cable × cake over IPv6, the router owner's journey through LuCI on OpenWrt's real
         userland on its defaults, netifd's PPPoE session dropping and returning, a recorded LTE link's
         first minute under sqmkit autorate (make lab-ci, make test)
`
	allUsage = `  all    every profile × every backend, the .qos scripts and lab/ext's shapers on cable, hotplug
         with every backend, the reference responsiveness server (rpm), tune beside a sweep on every
         profile; prints one table per profile and rewrites docs/results.md's tables (make lab)
`
	mqUsage = `  mq     [--profiles cable,fiber]  cake and cake_mq side by side on each profile, with the kernel tests (make lab-ci
         runs it on cable under --kernel 7, make lab on cable and fiber)
`
	runUsage         = "  run    --profile NAME|PATH [--backends none,cake,qos:sqmkit-cake.qos,ext:NAME=DIR,...] [--out DIR]\n"
	watchUsage       = "  watch  [--profile cable] [--backends steady,falls,rises]  sqmkit watch, its hours in minutes: says nothing on a steady line, names a line that fell or rose\n"
	journeyUsage     = "  journey [--profile cable]  the router owner's journey through LuCI on OpenWrt's real userland, then the lab's grade\n"
	openwrtUsage     = "  openwrt [--profile PPPOE-PROFILE] [--backends service,sqm-scripts]  netifd's PPPoE session drops and returns; the shaper follows\n"
	hotplugUsage     = "  hotplug [--profile PPPOE-PROFILE] [--backends cake,...]  the OpenWrt hotplug script on a real PPPoE session\n"
	kernelTestsUsage = "  kerneltests  only the Go tests that need the guest kernel (TestLab* in bin/labtests/*.test)\n"
	rpmUsage         = `  rpm    [--profiles adsl-atm,cable]  the reference responsiveness server (network-quality-server's nginx setup) in
         the server namespace, unshaped and with cake: sqmkit test URL graded beside sqmkit test against sqmkit serve,
         the RPM of goresponsiveness beside sqmkit's, sqmkit tune --server URL beside sqmkit tune (make lab)
`
	tuneUsage = `  tune   --profile NAME|PATH [--backends cake,fq_codel,nss] [--sweep] [-6]  sqmkit tune --write from the router, then
         the full grade at the rates it wrote; --sweep measures the sweep first and checks tune against it;
         -6 tunes over IPv6 (not on PPPoE profiles)
`
	sweepUsage = `  sweep  --profile NAME|PATH [--backends cake,fq_codel,nss] [--from 80] [--to 100] [--stop N]  every shaper rate
         from FROM to TO percent of the line in 1 % steps per direction: the best A+ rate (--stop N: a direction
         ends after N passing steps in a row)
`
)

func runDemo(repo string, args []string) int {
	return execute(repo, "demo", "demo", "", kernelArg("demo", args), []planRun{{Profile: "cable", Backends: []string{unshaped, "cake"}}}, false)
}

func runCI(repo string, args []string) int {
	return execute(repo, "ci", "ci", "", kernelArg("ci", args), append(slices.Clone(ciPlan), ciTrace(repo)), true)
}

// runAll runs the whole matrix on each kernel named (--kernel 6.1,6.12,7).
func runAll(repo string, args []string) int {
	names, err := profile.List(filepath.Join(repo, "lab/profiles"))
	if err != nil {
		fatal(err)
	}
	code := 0
	for _, k := range strings.Split(kernelArg("all", args), ",") {
		code = max(code, execute(repo, "all", "all-k"+k, "", k, allPlan(names, repo), true))
	}
	return code
}

// runMQ grades cake and cake_mq in one boot, profile by profile.
func runMQ(repo string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab mq", flag.ExitOnError)
	profiles := fs.String("profiles", "cable,fiber", "comma-separated profiles")
	kernel := kernelFlag(fs)
	fs.Parse(args)
	var plan []planRun
	for _, p := range strings.Split(*profiles, ",") {
		plan = append(plan, planRun{Profile: p, Backends: []string{"cake", "cake_mq"}})
	}
	return execute(repo, "mq", "mq", "", *kernel, plan, true)
}

// runRPM runs the reference responsiveness server's scenarios in one
// boot, profile by profile.
func runRPM(repo string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab rpm", flag.ExitOnError)
	profiles := fs.String("profiles", strings.Join(rpmProfiles, ","), "comma-separated profiles")
	kernel := kernelFlag(fs)
	fs.Parse(args)
	return execute(repo, "rpm", "rpm", "", *kernel, rpmPlan(strings.Split(*profiles, ",")), false)
}

// runKernelTestsCmd runs the kernel tests alone, no scenario.
func runKernelTestsCmd(repo string, args []string) int {
	return execute(repo, "kerneltests", "kerneltests", "", kernelArg("kerneltests", args), nil, true)
}

// kernelArg parses the one flag of the commands without options: --kernel.
func kernelArg(name string, args []string) string {
	fs := flag.NewFlagSet("sqmkit-lab "+name, flag.ExitOnError)
	k := kernelFlag(fs)
	fs.Parse(args)
	return *k
}

func runRun(repo string, args []string) int     { return runScenarios(repo, "run", args) }
func runJourney(repo string, args []string) int { return runScenarios(repo, "journey", args) }
func runOpenWrt(repo string, args []string) int { return runScenarios(repo, "openwrt-pppoe", args) }
func runHotplug(repo string, args []string) int { return runScenarios(repo, "hotplug", args) }
func runTune(repo string, args []string) int    { return runScenarios(repo, "tune", args) }
func runSweep(repo string, args []string) int   { return runScenarios(repo, "sweep", args) }
func runWatch(repo string, args []string) int   { return runScenarios(repo, "watch", args) }

// runScenarios is run, hotplug, tune and sweep: one profile, its
// backends, in the command's mode.
func runScenarios(repo, name string, args []string) int {
	fs := flag.NewFlagSet("sqmkit-lab "+name, flag.ExitOnError)
	defProfile, defBackends, mode := "cable", allBackends, ""
	switch name {
	case "hotplug":
		defProfile, defBackends, mode = "vdsl-pppoe-vlan7", sqmkitBackends, "hotplug"
	case "tune", "sweep":
		defBackends, mode = sqmkitBackends, name
	case "journey":
		defBackends, mode = nil, name
	case "watch":
		defBackends, mode = watchVariants, name
	case "openwrt-pppoe":
		defProfile, defBackends, mode = "vdsl-pppoe-vlan7", owrtWays, name
	}
	prof := fs.String("profile", defProfile, "profile name (lab/profiles/NAME.conf) or path to a profile file")
	usage := "comma-separated: none (unshaped), fq_codel, cake, nss, qos:sqmkit-BACKEND.qos (the OpenWrt package's script, sqm-scripts' way), ext:NAME=DIR (an external shaper: DIR/start, DIR/stop; lab/README.md)"
	if name == "watch" { // the watch's "backends" are its variants, each on cake
		usage = "comma-separated variants, each on cake: " + strings.Join(watchVariants, ", ") + " (lab/README.md)"
	}
	backends := fs.String("backends", strings.Join(defBackends, ","), usage)
	out := fs.String("out", "", "results directory (default lab/results/<time>-<profile>)")
	kernel := kernelFlag(fs)
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
	fs.Parse(args)
	if withSweep && (sp.From <= 0 || sp.To < sp.From || sp.Stop < 0) {
		fatal(fmt.Errorf("--from %d --to %d --stop %d: want 0 < from <= to and stop >= 0", sp.From, sp.To, sp.Stop))
	}
	bs := strings.Split(*backends, ",")
	if *backends == "" {
		bs = nil
	}
	for _, b := range bs {
		if ways := map[string][]string{"openwrt-pppoe": owrtWays, "watch": watchVariants}[mode]; ways != nil {
			if !slices.Contains(ways, b) {
				fatal(fmt.Errorf("--backends: %q: want %s", b, strings.Join(ways, ", ")))
			}
			continue
		}
		if _, err := parseBackend(b); err != nil && b != unshaped {
			fatal(fmt.Errorf("--backends: %w", err))
		}
	}
	plan := []planRun{{Profile: *prof, Backends: bs, Mode: mode, IPv6: v6}}
	if withSweep {
		plan[0].Sweep = &sp
	}
	return execute(repo, name, *prof, *out, *kernel, plan, false)
}

// execute resolves the plan's profiles on the host (a bad name fails before
// the boot), runs the plan in one guest, prints the tables, and returns the
// exit status. name names the results directory, cmd the command.
func execute(repo, cmd, name, out, kernel string, plan []planRun, kernelTests bool) int {
	profiles := filepath.Join(repo, "lab/profiles")
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
	k, err := resolveKernel(repo, kernel)
	if err != nil {
		fatal(err)
	}
	rs, err := runHost(repo, out, k, plan, kernelTests, cmd == "demo")
	if err != nil {
		printTable(os.Stdout, rs) // what the guest finished before it stopped
		fatal(err)
	}
	printTable(os.Stdout, rs)
	code, line := verdict(rs)
	switch cmd {
	case "demo":
		fmt.Printf("\nresults: %s\n", out)
		printDemo(rs) // the verdict comes last, after the notes
		return code
	case "all":
		if err := updateResults(filepath.Join(repo, "docs/results.md"), k.Series, rs); err != nil {
			fmt.Fprintln(os.Stderr, "sqmkit-lab:", err)
		} else {
			fmt.Println("\ndocs/results.md: the side-by-side tables rewritten from this run")
		}
	}
	fmt.Printf("\nresults: %s (guest kernel %s)\n%s\n", out, k.Series, line)
	return code
}
