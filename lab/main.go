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
	{"run", runUsage, false, runRun},
	{"report", reportUsage, false, runReport},
	{"hotplug", hotplugUsage, false, runHotplug},
	{"tune", tuneUsage, false, runTune},
	{"sweep", sweepUsage, false, runSweep},
	{"ab", abUsage, false, runAB},
	{"trace", traceUsage, false, runTrace},
	{"traces", tracesUsage, false, runTraces},
	{"kerneltests", kernelTestsUsage, false, runKernelTestsCmd},
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
Results go to lab/results/<time>-<name>/ (one result.json per scenario, plots,
logs, console.log); the exit status is non-zero when any scenario fails.
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
