package openwrttest

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/openwrt"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// A router owner without a buildroot: the static binary, run from /tmp
// as the README says, installs itself, its files and what it needs with
// the release's package manager on the running router, and removes all of
// it again: on an OpenWrt 24.10 (opkg, no LuCI, no sqm-scripts) and a 25.12
// (apk, LuCI and sqm-scripts as luci-app-sqm brings them). opkg and apk
// are not part of the built stack: each is a stand-in that records what it
// is asked, with a package database saying kmod-sched-core is installed.
func TestInstallWithoutBuildroot(t *testing.T) {
	for _, pm := range []string{"opkg", "apk"} {
		t.Run(pm, func(t *testing.T) {
			luci := pm == "apk"
			r := releaseRouter(t, pm, luci)
			before := tree(t, r.Root)

			if err := copyFile(filepath.Join(build(t), "sqmkit"), r.Path("/tmp/sqmkit"), 0o755); err != nil {
				t.Fatal(err)
			}
			code, out := r.run(nil, "/tmp/sqmkit", "install")
			if code != 0 {
				t.Fatalf("install: exit %d\n%s", code, out)
			}
			wantPM := []string{"update", map[string]string{"opkg": "install", "apk": "add"}[pm] + " kmod-ifb kmod-sched-cake ca-bundle"}
			if got := lines(t, r.Path("/tmp/"+pm+".log")); !slices.Equal(got, wantPM) {
				t.Errorf("%s was asked %q, want %q", pm, got, wantPM)
			}
			checkInstalled(t, r, luci)
			// a second install is an update of the files
			if code, out := r.sqmkit("install", "--no-deps"); code != 0 {
				t.Errorf("install again: exit %d\n%s", code, out)
			}

			// it shapes, then the one command removes it all
			r.rc("sqm", "disable")
			r.queue(true, "sqmkit-nss.qos", 20000, 10000)
			if code, out := r.initd("start"); code != 0 || !r.shaped("wan") {
				t.Fatalf("start after install: exit %d\n%s", code, out)
			}
			if code, out := r.sqmkit("uninstall"); code != 0 || !strings.Contains(out, "kept") {
				t.Fatalf("uninstall: exit %d\n%s", code, out)
			}
			if r.shaped("wan") || r.ingress("wan") {
				t.Errorf("uninstall left the shaper:\n%s", r.qdiscs())
			}
			// procd keeps a deleted service until its instance has exited
			// (service_stopped): on a loaded host that is after uninstall
			// returns (make harsh)
			r.eventually("procd drops sqmkit's service after uninstall", func() bool {
				_, ok := r.service("sqmkit")
				return !ok
			}, func() string { s, _ := r.service("sqmkit"); return fmt.Sprintf("procd still runs it: %+v", s) })
			if luci {
				r.rc("sqm", "enable") // as it was
			}
			after := tree(t, r.Root)
			wantExtra := []string{"etc/config/sqm"}
			if luci {
				wantExtra = nil // sqm-scripts' own config was there before
			}
			if extra := diff(after, before); !slices.Equal(extra, wantExtra) {
				t.Errorf("after uninstall, besides the kept config, the root has %q", extra)
			}
			if gone := diff(before, after); len(gone) > 0 {
				t.Errorf("uninstall removed what it did not install: %q", gone)
			}
		})
	}
}

// releaseRouter boots the stack as a release with package manager pm,
// which records what it is asked in /tmp/PM.log; kmod-sched-core is in its
// database. The 24.10 router has neither LuCI nor sqm-scripts.
func releaseRouter(t *testing.T, pm string, luci bool) *router {
	var bare []string // what the 24.10 router lacks
	if !luci {
		bare = []string{"www/luci-static/resources/luci.js", "etc/init.d/sqm", "etc/rc.d/S50sqm", "etc/config/sqm",
			"etc/hotplug.d/iface/11-sqm", "usr/lib/sqm", "etc/sqm"}
	}
	return newBareRouter(t, func(root string) error {
		for _, p := range bare {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				return err
			}
		}
		rec := "#!/bin/sh\necho \"$*\" >>/tmp/" + pm + ".log\n"
		switch pm {
		case "opkg":
			os.MkdirAll(filepath.Join(root, "usr/lib/opkg/info"), 0o755)
			os.WriteFile(filepath.Join(root, "usr/lib/opkg/info/kmod-sched-core.control"), []byte("Package: kmod-sched-core\n"), 0o644)
			return os.WriteFile(filepath.Join(root, "bin/opkg"), []byte(rec), 0o755)
		default:
			os.MkdirAll(filepath.Join(root, "lib/apk/db"), 0o755)
			os.WriteFile(filepath.Join(root, "lib/apk/db/installed"), []byte("P:busybox\nV:1\n\nP:kmod-sched-core\nV:6.12\n\n"), 0o644)
			return os.WriteFile(filepath.Join(root, "usr/bin/apk"), []byte(rec), 0o755)
		}
	})
}

// checkInstalled: every file where the feed packages put it, the
// first-install defaults run, the service enabled and running, and (with
// LuCI) rpcd answering for the plugin.
func checkInstalled(t *testing.T, r *router, luci bool) {
	t.Helper()
	for _, f := range openwrt.Files {
		info, err := os.Stat(r.Path("/" + f.Dst))
		switch {
		case f.Dst == "etc/uci-defaults/90-sqmkit":
			if err == nil {
				t.Errorf("%s is still there: the defaults did not run", f.Dst)
			}
		case err != nil:
			t.Errorf("%s: %v", f.Dst, err)
		case info.Mode().Perm() != f.Mode:
			t.Errorf("%s: mode %v, want %v", f.Dst, info.Mode().Perm(), f.Mode)
		}
	}
	b, _ := os.ReadFile(r.Path("/etc/config/sqm"))
	if !luci && !strings.Contains(string(b), "option script 'sqmkit-cake.qos'") {
		t.Errorf("the first-install defaults wrote %q", b)
	}
	if luci && !strings.Contains(string(b), "config queue 'eth1'") {
		t.Errorf("the defaults changed sqm-scripts' own config: %q", b)
	}
	if l, err := os.Readlink(r.Path("/etc/rc.d/S50sqmkit")); err != nil || l != "../init.d/sqmkit" {
		t.Errorf("the service is not enabled: %q %v", l, err)
	}
	if code, _ := r.initd("enabled"); code != 0 {
		t.Error("rc.common says the service is not enabled")
	}
	if _, ok := r.service("sqmkit"); !ok {
		t.Error("install did not start the service")
	}
	// luci-app-sqmkit's pages where LuCI is, nothing of it elsewhere
	for _, f := range openwrt.LuCIFiles {
		info, err := os.Stat(r.Path("/" + f.Dst))
		switch {
		case luci && (err != nil || info.Mode().Perm() != f.Mode):
			t.Errorf("luci-app-sqmkit's %s: %v %v", f.Dst, err, info)
		case !luci && err == nil:
			t.Errorf("%s installed without LuCI", f.Dst)
		}
	}
	code, out := r.run(nil, "ubus", "call", "sqmkit", "status")
	if luci && (code != 0 || !strings.Contains(out, "queues")) {
		t.Errorf("rpcd does not answer for sqmkit after install: exit %d\n%s", code, out)
	}
	if scripts := luciScripts(t, r.Path("/")); !slices.Equal(scripts[len(scripts)-3:], []string{"sqmkit-cake.qos", "sqmkit-fq_codel.qos", "sqmkit-nss.qos"}) {
		t.Errorf("LuCI's SQM page would list %q", scripts)
	}
}

// Uninstalling while sqm-scripts runs a queue with a sqmkit script stops
// it through sqm-scripts' own run.sh, so its state file goes with the
// tree, and says which sections still name the removed script.
func TestUninstallUnderSQMScripts(t *testing.T) {
	r := newBareRouter(t, nil)
	r.install()
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	if code, out := r.rc("sqm", "start"); code != 0 || !r.state("wan") {
		t.Fatalf("sqm start: exit %d\n%s", code, out)
	}
	code, out := r.sqmkit("uninstall")
	if code != 0 || r.shaped("wan") || r.state("wan") || !strings.Contains(out, "sections wan") {
		t.Errorf("uninstall: exit %d, shaped %v, state %v\n%s", code, r.shaped("wan"), r.state("wan"), out)
	}
}

// luciScripts lists the scripts luci-app-sqm's page offers: the entries of
// /usr/lib/sqm whose name ends in .qos (its view's filter).
func luciScripts(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "usr/lib/sqm"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if regexp.MustCompile(`\.qos$`).MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// tree lists the files and links under root, relative, skipping what the
// kernel and the harness own.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "sys" || rel == "tmp" || rel == "proc" || rel == "dev" {
			return fs.SkipDir
		}
		if !d.IsDir() {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// diff is what a has and b lacks.
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// The README's install commands fetch, for every DISTRIB_ARCH OpenWrt
// 24.10 and 25.12 name (testdata/distrib-arch.txt), the file that `make
// router` builds for it (scripts/size.sh), and are at most three; the
// README names the architectures Go has no port for (arm_fa526, ARMv4,
// fetches the ARMv5 build, which dies there on an illegal instruction).
func TestReadmeInstallCommands(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		tctest.Missing(t, "needs busybox (installed by scripts/deps.sh)")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)[strings.Index(string(readme), "## Install"):]
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(sec)
	if block == nil {
		t.Fatal("the Install section has no sh block")
	}
	cmds := strings.Split(strings.TrimSpace(block[1]), "\n")
	if len(cmds) > 3 || !strings.HasPrefix(cmds[0], "wget ") || !strings.Contains(cmds[len(cmds)-1], "sqmkit install") {
		t.Fatalf("install commands %q: want at most three, fetch first, sqmkit install last", cmds)
	}
	url := regexp.MustCompile(`"(https://[^"]*\$\(.*\))"`).FindStringSubmatch(cmds[0])
	if url == nil {
		t.Fatalf("no release URL in %q", cmds[0])
	}
	built := releaseTargets(t)
	arches, err := os.ReadFile("testdata/distrib-arch.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(arches), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		n++
		arch, want := f[0], f[1]
		release := filepath.Join(t.TempDir(), "openwrt_release")
		os.WriteFile(release, []byte("DISTRIB_ARCH='"+arch+"'\n"), 0o644)
		expr := strings.ReplaceAll(url[1], "/etc/openwrt_release", release)
		out, err := exec.Command(bb, "ash", "-c", `echo "`+expr+`"`).Output()
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		name := filepath.Base(strings.TrimSpace(string(out)))
		_, ok := built[name]
		switch {
		case want == "unsupported" && !strings.Contains(sec, arch):
			t.Errorf("DISTRIB_ARCH %s has no release; the README's Install does not say so", arch)
		case want != "unsupported" && (name != want || !ok):
			t.Errorf("DISTRIB_ARCH %s fetches %s, want %s (make router builds %v)", arch, name, want, slices.Sorted(maps.Keys(built)))
		}
	}
	if n < 30 {
		t.Errorf("only %d architectures in testdata/distrib-arch.txt", n)
	}
}

// releaseTargets reads scripts/size.sh's list: release file name -> the
// GOARCH and variant it is built with.
func releaseTargets(t *testing.T) map[string][2]string {
	t.Helper()
	size, err := os.ReadFile("../../scripts/size.sh")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?m)^for target in (.*); do`).FindStringSubmatch(string(size))
	if list == nil {
		t.Fatal("scripts/size.sh has no target list")
	}
	out := map[string][2]string{}
	for _, m := range regexp.MustCompile(`(\w+):(\w+):(\w*)`).FindAllStringSubmatch(list[1], -1) {
		out["sqmkit-"+m[1]] = [2]string{m[2], m[3]}
	}
	return out
}

// TestReleasesRun builds every release as `make router` does (within its
// size budget) and runs each on the oldest CPU of its family under
// qemu-user (ARMv5 arm926 for arm, 24Kc, MIPS64R2): each plans the worked
// example's router exactly as the host's build does. i386 runs on the
// host's kernel itself: qemu-user's i386 cannot run Go's 386 threads (a
// hello world crashes there too), so the no-SSE2 CPU is not emulated.
func TestReleasesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every release (minutes)")
	}
	bin := t.TempDir()
	c := exec.Command("sh", "../../scripts/size.sh")
	c.Env = append(os.Environ(), "BIN="+bin, "VERSION=test")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/size.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	want, err := exec.Command("go", "run", "../../cmd/sqmkit", "plan", "--root", "../../cmd/sqmkit/testdata/router").Output()
	if err != nil {
		t.Fatal(err)
	}
	// each GOARCH's CPUs: the oldest its OpenWrt targets have (ARMv5
	// arm926 and XScale, ARMv6 arm1176) and a common one
	cpus := map[string][][]string{
		"arm":      {{"qemu-arm", "-cpu", "arm926"}, {"qemu-arm", "-cpu", "pxa270"}, {"qemu-arm", "-cpu", "arm1176"}, {"qemu-arm", "-cpu", "cortex-a7"}},
		"arm64":    {{"qemu-aarch64", "-cpu", "cortex-a53"}},
		"mips":     {{"qemu-mips", "-cpu", "24Kc"}},
		"mipsle":   {{"qemu-mipsel", "-cpu", "24Kc"}},
		"mips64":   {{"qemu-mips64", "-cpu", "MIPS64R2-generic"}},
		"mips64le": {{"qemu-mips64el", "-cpu", "MIPS64R2-generic"}},
		"riscv64":  {{"qemu-riscv64"}}, "loong64": {{"qemu-loongarch64"}}, "amd64": {{}}, "386": {{}}}
	for name, target := range releaseTargets(t) {
		t.Run(name, func(t *testing.T) {
			runs, ok := cpus[target[0]]
			if !ok {
				t.Fatalf("no CPU to run GOARCH %s on: add one here", target[0])
			}
			for _, run := range runs {
				if len(run) > 0 {
					if _, err := exec.LookPath(run[0]); err != nil {
						tctest.Missing(t, "needs "+run[0]+" (qemu-user, installed by scripts/deps.sh)")
					}
				}
				cmd := append(slices.Clone(run), filepath.Join(bin, "release", name), "plan", "--root", "../../cmd/sqmkit/testdata/router")
				got, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
				if err != nil || string(got) != string(want) {
					t.Errorf("%q: %v\n%s", cmd, err, got)
				}
			}
		})
	}
}
