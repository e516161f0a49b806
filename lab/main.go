// Command sqmkit-lab proves sqmkit on a real kernel: it boots the Debian
// guest kernel under QEMU with the host's root filesystem, builds a
// client ⇄ router ⇄ modem ⇄ server lab in network namespaces whose modem
// is a bloated bottleneck, and grades the link unshaped and with each
// sqmkit backend. See lab/README.md.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// labCommand is one subcommand, in the order the usage lists them (each
// lives in a file of its own, as cmd/sqmkit's do).
type labCommand struct {
	name  string
	usage string // "" for the commands the lab starts itself (guest, replay, pppd)
	// guest: runs inside the VM, where only the run directory is
	// reachable (a checkout under /tmp sits below the guest's own
	// tmpfs), so it does not look for the repository
	guest bool
	run   func(repo string, args []string) int
}

var labCommands = []labCommand{
	{"demo", demoUsage, false, runDemo},
	{"ci", ciUsage, false, runCI},
	{"all", allUsage, false, runAll},
	{"mq", mqUsage, false, runMQ},
	{"run", runUsage, false, runRun},
	{"journey", journeyUsage, false, runJourney},
	{"openwrt", openwrtUsage, false, runOpenWrt},
	{"report", reportUsage, false, runReport},
	{"hotplug", hotplugUsage, false, runHotplug},
	{"tune", tuneUsage, false, runTune},
	{"rpm", rpmUsage, false, runRPM},
	{"sweep", sweepUsage, false, runSweep},
	{"ab", abUsage, false, runAB},
	{"trace", traceUsage, false, runTrace},
	{"watch", watchUsage, false, runWatch},
	{"traces", tracesUsage, false, runTraces},
	{"kerneltests", kernelTestsUsage, false, runKernelTestsCmd},
	{"part", partUsage, false, runPart},
	{"gotest", gotestUsage, false, runGoTest},
	{"parts", partsUsage, false, runParts},
	{"guest", guestUsage, true, runGuestCmd},
	{"replay", "", true, runReplay},
	{pppdKernelName, "", true, runPPPD},
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: sqmkit-lab COMMAND\n\n")
	for _, c := range labCommands {
		if c.usage != "" {
			fmt.Fprint(w, c.usage)
		}
	}
	fmt.Fprint(w, `
Every command that boots the guest takes --kernel 6.1 (the host's), 6.12 or 7
(fetched by scripts/kernels.sh). Results go to lab/results/<time>-<name>/ (one
result.json per scenario, plots, logs, console.log). Exit status: 0 when every
scenario proved its claim, 1 when one failed, 3 when none failed but one could
not be measured (the host or the guest was too busy): not a pass.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage(os.Stdout)
		return
	}
	for _, c := range labCommands {
		if c.name != name {
			continue
		}
		repo := ""
		if !c.guest {
			var err error
			if repo, err = repoRoot(); err != nil {
				fatal(err)
			}
		}
		os.Exit(c.run(repo, os.Args[2:]))
	}
	fmt.Fprintf(os.Stderr, "sqmkit-lab: unknown command %q\n\n", name)
	usage(os.Stderr)
	os.Exit(2)
}

// Exit statuses: every scenario proven (pass, or a recorded limitation);
// a scenario failed (the shaper, or the lab, is wrong); nothing failed but
// something could not be measured (inconclusive: the host kept the guest
// too busy; unproven: a bar the guest's headroom kept from being graded).
// A run that could not measure is not a pass: it proved less than it says.
const (
	exitProven     = 0
	exitFailed     = 1
	exitUnmeasured = 3
)

// exitStatus is the run's exit status (exitProven, exitFailed,
// exitUnmeasured), and verdict the line that says it last.
func exitStatus(rs []result) int {
	code, _ := verdict(rs)
	return code
}

// verdict counts what a run proved (TestExitStatus).
func verdict(rs []result) (code int, line string) {
	var proven, failed, unmeasured []string
	for _, r := range rs {
		name := r.Profile + "/" + r.Backend
		switch r.Status {
		case "pass", "limitation":
			proven = append(proven, name)
		case "inconclusive", "unproven":
			unmeasured = append(unmeasured, name)
		default:
			failed = append(failed, name)
		}
	}
	switch {
	case len(failed) > 0:
		return exitFailed, fmt.Sprintf("FAILED: %s (%d proven, %d not measured)", strings.Join(failed, ", "), len(proven), len(unmeasured))
	case len(unmeasured) > 0:
		return exitUnmeasured, fmt.Sprintf("NOT PROVEN: %s could not be measured on this host (%d of %d proven); run again on a quieter host (exit %d)",
			strings.Join(unmeasured, ", "), len(proven), len(rs), exitUnmeasured)
	}
	return exitProven, fmt.Sprintf("proven: all %d scenarios", len(proven))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sqmkit-lab:", err)
	os.Exit(1)
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
