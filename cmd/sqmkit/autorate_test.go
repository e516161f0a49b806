package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
