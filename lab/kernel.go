package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sqmkit/sqmkit/lab/internal/vm"
)

// Kernel series the lab boots: the host's Debian 12 kernel, and the ones
// scripts/kernels.sh fetches from Debian's archive (docs/hacking.md, "The
// lab's kernels"). 6.12 is the series OpenWrt 25.12 runs; cake_mq is in
// mainline from 7.0.
const (
	hostSeries = "6.1"
	kernelHelp = "guest kernel `SERIES`: 6.1 (the host's, Debian 12), 6.12 (OpenWrt 25.12's series) or 7 (cake_mq), fetched by scripts/kernels.sh into lab/.cache"
)

var kernelSeries = []string{hostSeries, "6.12", "7"}

// guestKernel is what a boot of one kernel series needs.
type guestKernel struct {
	Series, Kernel string
	Modules        string // its modules directory
	// VMModules is Modules when it is not the host's /lib/modules (the
	// guest mounts it there), and TC a directory with a tc that knows the
	// kernel's newer qdiscs; both "" for the host's kernel.
	VMModules, TC string
}

// kernelFlag registers --kernel on fs.
func kernelFlag(fs *flag.FlagSet) *string { return fs.String("kernel", hostSeries, kernelHelp) }

// resolveKernel finds series' kernel, fetching it (and the tc beside it)
// with scripts/kernels.sh when the cache lacks it.
func resolveKernel(repo, series string) (guestKernel, error) {
	if series == hostSeries || series == "" {
		k, mods, err := vm.FindKernel()
		return guestKernel{Series: hostSeries, Kernel: k, Modules: mods}, err
	}
	known := false
	for _, s := range kernelSeries {
		known = known || s == series
	}
	if !known {
		return guestKernel{}, fmt.Errorf("--kernel %q: want one of %s", series, strings.Join(kernelSeries, ", "))
	}
	cache := filepath.Join(repo, "lab/.cache")
	kenv, tenv := filepath.Join(cache, "kernels", series, "kernel.env"), filepath.Join(cache, "tc.env")
	if !exists(kenv) || !exists(tenv) {
		cmd := exec.Command(filepath.Join(repo, "scripts/kernels.sh"), series, "tc")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return guestKernel{}, fmt.Errorf("fetching kernel %s: scripts/kernels.sh: %w", series, err)
		}
	}
	k, err := readEnv(kenv)
	if err != nil {
		return guestKernel{}, err
	}
	t, err := readEnv(tenv)
	if err != nil {
		return guestKernel{}, err
	}
	g := guestKernel{Series: series, Kernel: k["KERNEL"], Modules: k["MODULES"], VMModules: k["MODULES"], TC: t["TC"]}
	if !exists(g.Kernel) || !exists(g.Modules) || !exists(filepath.Join(g.TC, "tc")) {
		return guestKernel{}, fmt.Errorf("%s or %s names files that are gone; remove them and run scripts/kernels.sh %s tc", kenv, tenv, series)
	}
	return g, nil
}

// readEnv reads KEY=VALUE lines.
func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// seriesOf is the lab's kernel series of a guest kernel release: its
// major.minor, and the major alone from 7 on (every 7.x has cake_mq).
func seriesOf(release string) string {
	parts := strings.SplitN(release, ".", 3)
	switch {
	case len(parts) < 2:
		return release
	case parts[0] >= "7" && len(parts[0]) == 1:
		return parts[0]
	}
	return parts[0] + "." + strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
}
