package openwrttest

import (
	"io/fs"
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
			wantPM := []string{"update", map[string]string{"opkg": "install", "apk": "add"}[pm] + " kmod-ifb kmod-sched-cake"}
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
			if _, ok := r.service("sqmkit"); ok {
				t.Error("procd still runs sqmkit's service after uninstall")
			}
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

// The README's install commands fetch, for each router architecture, a
// file that `make router` builds (scripts/size.sh), and are at most three.
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
	size, err := os.ReadFile("../../scripts/size.sh")
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, m := range regexp.MustCompile(`(\w+):\w+:\w*`).FindAllStringSubmatch(regexp.MustCompile(`(?m)^for target in (.*); do`).FindStringSubmatch(string(size))[1], -1) {
		built = append(built, "sqmkit-"+m[1])
	}
	for _, arch := range []string{"aarch64_cortex-a53", "arm_cortex-a7_neon-vfpv4", "mipsel_24kc", "mips_24kc", "x86_64"} {
		release := filepath.Join(t.TempDir(), "openwrt_release")
		os.WriteFile(release, []byte("DISTRIB_ARCH='"+arch+"'\n"), 0o644)
		expr := strings.ReplaceAll(url[1], "/etc/openwrt_release", release)
		out, err := exec.Command(bb, "ash", "-c", `echo "`+expr+`"`).Output()
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		name := filepath.Base(strings.TrimSpace(string(out)))
		if !slices.Contains(built, name) {
			t.Errorf("DISTRIB_ARCH %s fetches %s; make router builds %q", arch, name, built)
		}
	}
}
