package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func TestAutorateCLI(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(`config queue 'wan'
	option enabled '1'
	option interface 'wan'
	option download '40000'
	option upload '8000'
	option autorate '1'

config queue 'lan'
	option enabled '1'
	option interface 'eth1'
	option download '40000'
	option upload '8000'

config queue 'guest'
	option enabled '0'
	option interface 'eth2'
	option download '40000'
	option upload '8000'
	option autorate '1'
`), 0o644)
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string // stdout, exactly
		err  string // in stderr
	}{
		{"list: enabled sections with autorate", []string{"--root", root, "--list"}, 0, "wan\n", ""},
		{"bad floor", []string{"--root", root, "--min", "10000", "wan"}, 2, "", "--min \"10000\": want DOWN:UP in kbit/s"},
		{"trailing junk in a ceiling", []string{"--root", root, "--max", "80000:16000x", "wan"}, 2, "", "--max \"80000:16000x\": want DOWN:UP in kbit/s"},
		{"floor above the base", []string{"--root", root, "--min", "50000:1000", "wan"}, 1, "", "autorate_min_download: 50000 kbit/s is above the download rate 40000"},
		{"bad reflector", []string{"--root", root, "--reflectors", "1.1.1.1,dns.google", "wan"}, 2, "", `--reflectors: "dns.google" is not an IP address`},
		{"two queues, none named", []string{"--root", root}, 1, "", "name the one to follow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"autorate"}, c.args...), &out, &errb)
			if code != c.code || (c.code == 0 && out.String() != c.out) || !strings.Contains(errb.String(), c.err) {
				t.Errorf("exit %d (want %d)\nstdout %q (want %q)\nstderr %s (want %q)", code, c.code, out.String(), c.out, errb.String(), c.err)
			}
		})
	}
}

// TestAutorateListSQMScripts: with sqm-scripts' service enabled, --list
// names only the queues sqm-scripts runs through a sqmkit-*.qos script;
// one on a stock script (simplest.qos) is left out, saying why, since its
// instance could only exit and be started again by procd for ever.
func TestAutorateListSQMScripts(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.MkdirAll(filepath.Join(root, "etc/init.d"), 0o755)
	os.MkdirAll(filepath.Join(root, "etc/rc.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte(`config queue 'ours'
	option enabled '1'
	option interface 'wan'
	option download '40000'
	option upload '8000'
	option script 'sqmkit-cake.qos'
	option autorate '1'

config queue 'stock'
	option enabled '1'
	option interface 'eth1'
	option download '40000'
	option upload '8000'
	option script 'simplest.qos'
	option autorate '1'
`), 0o644)
	list := func() (string, string) {
		var out, errb bytes.Buffer
		if code := run([]string{"autorate", "--root", root, "--list"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		return out.String(), errb.String()
	}
	if out, _ := list(); out != "ours\nstock\n" {
		t.Errorf("sqmkit's own service applies every queue: --list %q", out)
	}
	os.WriteFile(filepath.Join(root, "etc/init.d/sqm"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("../init.d/sqm", filepath.Join(root, "etc/rc.d/S50sqm"))
	out, errs := list()
	if out != "ours\n" || !strings.Contains(errs, "section stock: sqm-scripts runs its own simplest.qos") {
		t.Errorf("with sqm-scripts enabled: --list %q, stderr %q", out, errs)
	}
}

// The systemd unit starts a command this binary has, with flags it knows.
func TestSystemdUnit(t *testing.T) {
	f, err := os.Open("../../linux/systemd/sqmkit-autorate@.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var exec []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
			exec = strings.Fields(v)
		}
	}
	if len(exec) < 3 || exec[0] != "/usr/bin/sqmkit" || exec[1] != "autorate" {
		t.Fatalf("ExecStart %q", exec)
	}
	var errb bytes.Buffer
	code := run([]string{"autorate", "-h"}, &bytes.Buffer{}, &errb)
	for _, a := range exec[2:] {
		if name, ok := strings.CutPrefix(a, "-"); ok && !strings.Contains(errb.String(), "-"+strings.TrimLeft(name, "-")) {
			t.Errorf("flag %s is not one of sqmkit autorate's (exit %d):\n%s", a, code, errb.String())
		}
	}
}

// TestAutorateSIGHUPRestores: autorate started from an SSH session that
// drops gets SIGHUP. It ends as on SIGTERM, with the base rates restored,
// and exits 0; it used to die of the signal (129), leaving whatever rate it
// had cut to in the kernel and in the rate state that hotplug and reload
// plan with.
func TestAutorateSIGHUPRestores(t *testing.T) {
	ns := tctest.NewNetns(t, "hup")
	ns.Exec(t, "ip", "link", "set", "lo", "up")
	bin := buildSqmkit(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/config"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/config/sqm"), []byte("config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n\toption download '20000'\n\toption upload '10000'\n\toption script 'sqmkit-nss.qos'\n\toption autorate '1'\n"), 0o644)
	env := shimEnv(bin)
	if code, out := sqmkitEnv(t, ns, bin, env, "start", "--root", root, "--probe-cache", ""); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { sqmkitEnv(t, ns, bin, env, "stop", "--root", root) })
	if code, out := sqmkitEnv(t, ns, bin, env, "rate", "--root", root, "--download", "15000", "--upload", "8000", "wan"); code != 0 {
		t.Fatalf("rate: exit %d\n%s", code, out)
	}
	cmd := exec.Command("ip", append(append([]string{"netns", "exec", ns.Name, "env"}, env...), bin, "autorate", "--root", root, "--reflectors", "127.0.0.1", "wan")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	if err != nil || !strings.Contains(stderr.String(), "stopped; shaper back at 20000/10000 kbit/s") {
		t.Errorf("autorate after SIGHUP: %v\n%s", err, stderr.String())
	}
	if q := ns.Exec(t, "tc", "qdisc", "show", "dev", "wan"); !strings.Contains(q, "rate 10Mbit") {
		t.Errorf("the upload is not back at its base rate:\n%s", q)
	}
	if code, out := sqmkitEnv(t, ns, bin, env, "status", "--root", root); code != 0 {
		t.Errorf("status plans with a rate autorate left: exit %d\n%s", code, out)
	}
}
