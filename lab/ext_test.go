package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

func TestParseExt(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"start", "stop"} {
		os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755)
	}
	noStop := t.TempDir()
	os.WriteFile(filepath.Join(noStop, "start"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(noStop, "stop"), []byte("#!/bin/sh\n"), 0o644) // not executable
	for _, tc := range []struct {
		arg, err string
	}{
		{"ext:htb=" + dir, ""},
		{"ext:htb", "want ext:NAME=DIR"},
		{"ext:=" + dir, "want ext:NAME=DIR"},
		{"ext:a/b=" + dir, "want ext:NAME=DIR"},
		{"ext:x=" + noStop, "stop is not an executable file"},
		{"ext:x=/nonexistent", "start is not an executable file"},
	} {
		b, err := parseBackend(tc.arg)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.arg, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %q", tc.arg, err, tc.err)
		case err == nil && (b.name() != "ext:htb" || b.kind() != ""):
			t.Errorf("%s: name %q kind %q", tc.arg, b.name(), b.kind())
		}
	}
	c, _ := extBackend{label: "htb", dir: dir}.command(nil, &scenario{lab: []string{"LAB_WAN=wan"}}, true)
	if len(c.args) != 1 || c.args[0] != filepath.Join(dir, "stop") || !slices.Contains(c.env, "LAB_WAN=wan") {
		t.Errorf("stop command %+v", c)
	}
}

// The size-table overhead is what the qdisc's device does not count yet.
func TestLabEnv(t *testing.T) {
	cable := &profile.Profile{Name: "cable", Down: 40000, Up: 8000, Overhead: 18, LinkLayer: "ethernet"}
	vdsl := &profile.Profile{Name: "vdsl", Down: 50000, Up: 10000, Overhead: 34, LinkLayer: "ptm", Encap: profile.Encap{PPPoE: true, VLAN: 7}}
	for _, tc := range []struct {
		p    *profile.Profile
		wan  string
		want []string
	}{
		{cable, "wan", []string{"LAB_WAN=wan", "LAB_LINE_DOWN_KBIT=40000", "LAB_DOWN_KBIT=38000", "LAB_UP_KBIT=7600", "LAB_OVERHEAD=18", "LAB_STAB_OVERHEAD=4", "LAB_LINKLAYER=ethernet", "LAB_SCRATCH=/s"}},
		{vdsl, pppIfname, []string{"LAB_WAN=pppoe-wan", "LAB_OVERHEAD=34", "LAB_STAB_OVERHEAD=34", "LAB_ENCAP=pppoe+vlan 7"}},
	} {
		env := labEnv(tc.p, tc.wan, "/s", tc.p.Down*95/100, tc.p.Up*95/100)
		for _, w := range tc.want {
			if !slices.Contains(env, w) {
				t.Errorf("%s: env lacks %s: %v", tc.p.Name, w, env)
			}
		}
	}
}

// The external backends in lab/ext are POSIX shell, like the scripts users
// run on their routers.
func TestExtShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		tctest.Missing(t, "shellcheck not installed (scripts/deps.sh installs it)")
	}
	for _, e := range extExamples {
		for _, prog := range []string{"start", "stop"} {
			path := filepath.Join("ext", e, prog)
			if out, err := exec.Command("shellcheck", "-s", "sh", path).CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", path, err, out)
			}
			if _, err := parseBackend("ext:" + e + "=" + filepath.Join("ext", e)); err != nil {
				t.Error(err)
			}
		}
	}
}

// An external backend's prepare runs on the host, in the repository, with
// the snapshot as its argument; its failure names its last line.
func TestPrepareExt(t *testing.T) {
	repo, snap := t.TempDir(), t.TempDir()
	if err := prepareExt(repo, snap); err != nil {
		t.Fatalf("no prepare: %v", err)
	}
	os.WriteFile(filepath.Join(snap, "prepare"), []byte("#!/bin/sh\npwd > \"$1/ran\"\n"), 0o755)
	if err := prepareExt(repo, snap); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(snap, "ran")); strings.TrimSpace(string(b)) != repo {
		t.Errorf("prepare ran in %q, want the repository %q", b, repo)
	}
	os.WriteFile(filepath.Join(snap, "prepare"), []byte("#!/bin/sh\necho first\necho no tarball >&2\nexit 3\n"), 0o755)
	if err := prepareExt(repo, snap); err == nil || !strings.Contains(err.Error(), "no tarball") {
		t.Errorf("failing prepare: %v, want its last line", err)
	}
}

// lab/ext/cake-autorate's prepare unpacks the pinned cake-autorate into the
// snapshot; its start writes a config cake-autorate itself accepts (the
// matched variant's thresholds included) before it launches.
func TestCakeAutorateExt(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err == nil {
		for _, c := range [][]string{{"-s", "sh", "-x", "lab/ext/cake-autorate/prepare", "lab/ext/cake-autorate/stop"}, {"-s", "bash", "lab/ext/cake-autorate/start"}} {
			cmd := exec.Command("shellcheck", c...)
			cmd.Dir = ".." // where prepare's source path starts
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", c, err, out)
			}
		}
	}
	repo, _ := filepath.Abs("..")
	if _, err := os.Stat(filepath.Join(repo, "../shared/openwrt-src")); err != nil {
		t.Skip("../shared/openwrt-src absent: prepare would clone cake-autorate from upstream (no network here); the lab's trace runs use it")
	}
	snap := t.TempDir()
	os.CopyFS(snap, os.DirFS("ext/cake-autorate"))
	t.Setenv("SQMKIT_CACHE", t.TempDir())
	if err := prepareExt(repo, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(snap, "src/defaults.sh")); err != nil {
		t.Fatalf("prepare left no cake-autorate: %v", err)
	}
	keys, err := exec.Command("sh", "-c", `grep -E '^[a-z_]+=' "$0" | sed 's/=.*//'`, filepath.Join(snap, "src/defaults.sh")).Output()
	if err != nil {
		t.Fatal(err)
	}
	known := strings.Fields(string(keys))
	script, _ := os.ReadFile("ext/cake-autorate/start")
	for _, line := range strings.Split(string(script), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "echo" {
			continue
		}
		key, _, ok := strings.Cut(strings.Trim(f[1], `"`), "=")
		if ok && !slices.Contains(known, key) {
			t.Errorf("start writes %q, which cake-autorate's defaults.sh does not know (it would refuse the config)", key)
		}
	}
}
