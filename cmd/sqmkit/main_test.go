package main

import (
	"bytes"
	"flag"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
)

func TestParseFlagsErrorsAreShort(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		ok       bool
		code     int
		want     []string
		maxLines int
	}{
		{"good", []string{"-n", "3", "x"}, true, 0, nil, 0},
		{"help prints the usage", []string{"-h"}, false, 0, []string{"Usage: sqmkit demo", "-n"}, 100},
		{"bad value", []string{"-n", "many"}, false, 2, []string{`invalid value "many" for flag -n`, "run 'sqmkit demo -h'"}, 2},
		{"unknown flag", []string{"-bogus"}, false, 2, []string{"-bogus", "run 'sqmkit demo -h'"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			commands["demo"] = command{name: "demo", summary: "a test command"}
			defer delete(commands, "demo")
			fs := newFlagSet("demo", "ARG")
			var out bytes.Buffer
			fs.SetOutput(&out)
			fs.Int("n", 1, "a number")
			ok, code := parseFlags(fs, c.args)
			if ok != c.ok || code != c.code {
				t.Fatalf("parseFlags(%q) = %v, %d; want %v, %d", c.args, ok, code, c.ok, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if n := strings.Count(out.String(), "\n"); n > c.maxLines {
				t.Errorf("output has %d lines, want at most %d:\n%s", n, c.maxLines, out.String())
			}
		})
	}
}

// Every command builds its flags and prints its usage for -h: a flag
// defined twice panics there (sqmkit rate's --download beside the config
// override of that name did, on every run).
func TestEveryCommandHelp(t *testing.T) {
	if len(commands) < 10 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for name, c := range commands {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := c.run([]string{"-h"}, &out, &errb); code != 0 || !strings.Contains(out.String()+errb.String(), "Usage: sqmkit "+name) {
				t.Errorf("sqmkit %s -h: exit %d\n%s%s", name, code, out.String(), errb.String())
			}
			// each flag's line shows one placeholder that says what to
			// give: a backtick in a flag's text made the words between
			// them the placeholder ("-by-interface start --by-interface
			// -- IFACE"), and a Func flag without one shows "value"
			for _, l := range strings.Split(out.String()+errb.String(), "\n") {
				if !strings.HasPrefix(l, "  -") {
					continue
				}
				head, _, _ := strings.Cut(strings.TrimSpace(l), "\t")
				if f := strings.Fields(head); len(f) > 2 || len(f) == 2 && (f[1] == "value" || !placeholder.MatchString(f[1])) {
					t.Errorf("sqmkit %s -h: %q shows no meaningful placeholder", name, head)
				}
			}
		})
	}
}

// placeholder: an upper-case name (KBIT, DOWN:UP, HOST[:PORT], 1|0,
// FILE.flent.gz) or
// the flag package's type words for a typed flag.
var placeholder = regexp.MustCompile(`^([A-Z0-9][A-Za-z0-9_:|\[\].]*|duration|int|uint|float|string|secret|bytes)$`)

// TestStopTakesWhereFlags: stop's -h shows the flags that say where a tree
// is, not the rates or qdisc options, which change nothing it does; a
// start's command line with "stop" in its place is still accepted.
func TestStopTakesWhereFlags(t *testing.T) {
	var out bytes.Buffer
	run([]string{"stop", "-h"}, &out, &out)
	for _, f := range []string{"-interface", "-ifb", "-backend", "-script", "-all", "-by-interface"} {
		if !regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(out.String()) {
			t.Errorf("stop -h lacks %s:\n%s", f, out.String())
		}
	}
	for _, f := range []string{"-download", "-upload", "-overhead", "-iqdisc-opts"} {
		if regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(out.String()) {
			t.Errorf("stop -h shows %s, which a stop does not use", f)
		}
	}
	fs := newFlagSet("stop", "")
	fs.SetOutput(&out)
	config.RegisterFlags(fs, config.WhereFlags...)
	if ok, _ := parseFlags(fs, []string{"--interface", "eth0", "--download", "95000"}); !ok {
		t.Errorf("stop refused a start's rate flag: %s", out.String())
	}
}

// TestProductImportsNoLab: the product, its tests included, depends on
// nothing under lab/ (the lab depends on the product, never the reverse;
// the tc shim the tests need lives in internal/tc/tcshim).
func TestProductImportsNoLab(t *testing.T) {
	c := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./cmd/...", "./internal/...", "./openwrt/...")
	c.Dir = "../.."
	out, err := c.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/sqmkit/sqmkit/lab") {
			t.Errorf("the product depends on %s", p)
		}
	}
}

// TestPurePackagesTouchNoKernel: planning, the search and the plots are
// pure functions of their input (docs/hacking.md, "Layout"): none of them,
// its tests aside, links the executor, the test client or a tc runner.
func TestPurePackagesTouchNoKernel(t *testing.T) {
	live := []string{"internal/apply", "internal/bbclient", "internal/bbserver", "internal/tc", "internal/tune", "internal/rpm", "internal/autorate", "internal/doctor"}
	for _, pkg := range []string{"./internal/plan", "./internal/search", "./internal/report/plot"} {
		c := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
		c.Dir = "../.."
		out, err := c.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, p := range strings.Fields(string(out)) {
			for _, l := range live {
				if p == "github.com/sqmkit/sqmkit/"+l || strings.HasPrefix(p, "github.com/sqmkit/sqmkit/"+l+"/") {
					t.Errorf("%s depends on %s", pkg, p)
				}
			}
		}
	}
}

// TestFlagsAnywhere: flags before, between and after the arguments, as
// users type them; after "--" everything is an argument.
func TestFlagsAnywhere(t *testing.T) {
	for _, c := range []struct {
		args      []string
		pos       []string
		v, server string
	}{
		{[]string{"wan", "--server", "s.example"}, []string{"wan"}, "", "s.example"},
		{[]string{"-v", "x", "--server", "s.example", "y"}, []string{"x", "y"}, "1", "s.example"},
		{[]string{"--server", "s", "--", "-all", "--v"}, []string{"-all", "--v"}, "", "s"},
		{[]string{"a", "--", "--server", "b"}, []string{"a", "--server", "b"}, "", ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		v := fs.Bool("v", false, "")
		server := fs.String("server", "", "")
		if err := parseAnywhere(fs, c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if !slices.Equal(fs.Args(), c.pos) || (c.v == "1") != *v || *server != c.server {
			t.Errorf("%q: args %q v %v server %q; want %q %v %q", c.args, fs.Args(), *v, *server, c.pos, c.v == "1", c.server)
		}
	}
	// the README's autorate line: the flag after the section is read
	var out, errb bytes.Buffer
	code := run([]string{"autorate", "wan", "--root", "testdata/nothing", "--server", "192.0.2.9"}, &out, &errb)
	if strings.Contains(errb.String(), "one SECTION or IFACE") || code == 2 {
		t.Errorf("autorate wan --server ...: exit %d: %s", code, errb.String())
	}
}
