package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// extBackend is an external shaper or controller: a directory with
// executable `start` and `stop`, and optionally `setup`, which the lab runs
// once per boot before its first start. They run in the router namespace
// with the LAB_* environment (labEnv); lab/README.md documents the contract.
type extBackend struct{ label, dir string }

var extName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// parseExt reads NAME=DIR and checks the directory's programs.
func parseExt(s string) (backend, error) {
	label, dir, ok := strings.Cut(s, "=")
	if !ok || !extName.MatchString(label) || dir == "" {
		return nil, fmt.Errorf("backend %q: want ext:NAME=DIR (NAME of letters, digits, '.', '_', '-'; DIR with executable start and stop)", extPrefix+s)
	}
	for _, prog := range []string{"start", "stop"} {
		st, err := os.Stat(filepath.Join(dir, prog))
		if err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("backend %q: %s is not an executable file (an external backend needs executable start and stop)", extPrefix+s, filepath.Join(dir, prog))
		}
	}
	return extBackend{label: label, dir: dir}, nil
}

func (b extBackend) name() string { return extPrefix + b.label }
func (b extBackend) kind() string { return "" }

func (b extBackend) command(g *guest, sc *scenario, stop bool) (command, error) {
	prog := "start"
	if stop {
		prog = "stop"
	}
	return command{env: sc.lab, args: []string{filepath.Join(b.dir, prog)}}, nil
}

// setup runs the backend's setup program, if it has one, once per boot.
func (b extBackend) setup(g *guest, sh *shell, sc *scenario) error {
	path := filepath.Join(b.dir, "setup")
	if _, err := os.Stat(path); err != nil || g.setUp[b.dir] {
		return nil
	}
	out, err := (&shell{log: sh.log, env: sc.lab}).run(nsRouter, path)
	if err != nil {
		return fmt.Errorf("%s setup: %w", b.name(), err)
	}
	g.setUp[b.dir] = true
	g.say("%s: setup done %s", b.name(), lastLine(out))
	return nil
}

// labEnv is the documented environment of external backends (lab/README.md).
func labEnv(p *profile.Profile, wan, scratch string, down, up int) []string {
	// A qdisc on an Ethernet or VLAN device counts the 14-byte Ethernet
	// header in a packet's length; on the PPP device it counts the IP
	// packet alone. A size table's overhead is added to that length.
	header := 14
	if wan == pppIfname {
		header = 0
	}
	return []string{
		"LAB_PROFILE=" + p.Name,
		"LAB_WAN=" + wan,
		"LAB_LAN=lan",
		fmt.Sprintf("LAB_LINE_DOWN_KBIT=%d", p.Down),
		fmt.Sprintf("LAB_LINE_UP_KBIT=%d", p.Up),
		fmt.Sprintf("LAB_DOWN_KBIT=%d", down),
		fmt.Sprintf("LAB_UP_KBIT=%d", up),
		"LAB_LINKLAYER=" + p.LinkLayer,
		fmt.Sprintf("LAB_OVERHEAD=%d", p.Overhead),
		fmt.Sprintf("LAB_STAB_OVERHEAD=%d", p.Overhead-header),
		"LAB_ENCAP=" + p.Encap.String(),
		"LAB_SCRATCH=" + scratch,
	}
}
