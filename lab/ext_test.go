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
