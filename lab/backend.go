package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// backend is what a shaped scenario starts and stops in the router
// namespace: one of sqmkit's backends through `sqmkit start`, one of the
// OpenWrt package's .qos scripts through sqm-scripts' calling convention,
// or (issue 14) an external shaper.
type backend interface {
	// name is how the command line and the results name it.
	name() string
	// kind is sqmkit's backend underneath (nss, cake, fq_codel), "" for a
	// foreign shaper.
	kind() string
	// start shapes the router's link and returns what it printed.
	start(g *guest, t *topo, sc *scenario) (string, error)
	// stop removes what start added.
	stop(g *guest, t *topo, sc *scenario) (string, error)
}

// scenario is one backend's run on one topology: its router root and the
// rates the lab gives it.
type scenario struct {
	root     string // the router's --root (IPKG_INSTROOT)
	env      []string
	dev      string // the device the queue names
	down, up int    // shaper rates, kbit/s
}

// sqmkitBackends are sqmkit's own, started with `sqmkit start --root`.
var sqmkitBackends = []string{"fq_codel", "cake", "nss"}

// qosPrefix names a .qos script of the OpenWrt package as a backend:
// qos:sqmkit-cake.qos.
const qosPrefix = "qos:"

// parseBackend turns a command-line name into a backend.
func parseBackend(s string) (backend, error) {
	switch {
	case slices.Contains(sqmkitBackends, s):
		return sqmkitBackend(s), nil
	case strings.HasPrefix(s, qosPrefix):
		script := strings.TrimPrefix(s, qosPrefix)
		kind := strings.TrimSuffix(strings.TrimPrefix(script, "sqmkit-"), ".qos")
		if !slices.Contains(sqmkitBackends, kind) {
			return nil, fmt.Errorf("backend %q: want qos:sqmkit-nss.qos, qos:sqmkit-cake.qos or qos:sqmkit-fq_codel.qos", s)
		}
		return qosBackend{script: script, backend: kind}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want none, %s, or qos:sqmkit-BACKEND.qos)", s, strings.Join(sqmkitBackends, ", "))
}

type sqmkitBackend string

func (b sqmkitBackend) name() string { return string(b) }
func (b sqmkitBackend) kind() string { return string(b) }

func (b sqmkitBackend) start(g *guest, t *topo, sc *scenario) (string, error) {
	return (&shell{log: t.sh.log, env: sc.env}).run(nsRouter, g.tools.sqmkit, "start", "--root", sc.root)
}

func (b sqmkitBackend) stop(g *guest, t *topo, sc *scenario) (string, error) {
	return (&shell{log: t.sh.log, env: sc.env}).run(nsRouter, g.tools.sqmkit, "stop", "--root", sc.root)
}

// qosBackend runs a .qos script of the OpenWrt package the way
// sqm-scripts' start-sqm and stop-sqm do (openwrt/test/start-sqm stands in
// for them), with the package installed in the router root.
type qosBackend struct{ script, backend string }

func (b qosBackend) name() string { return qosPrefix + b.script }
func (b qosBackend) kind() string { return b.backend }

func (b qosBackend) run(g *guest, t *topo, sc *scenario, stop bool) (string, error) {
	if err := installPackage(g, sc.root); err != nil {
		return "", err
	}
	env := append(slices.Clone(sc.env), "IPKG_INSTROOT="+sc.root, "IFACE="+sc.dev, "SCRIPT="+b.script,
		fmt.Sprintf("UPLINK=%d", sc.up), fmt.Sprintf("DOWNLINK=%d", sc.down))
	if stop {
		env = append(env, "STOP=1")
	}
	return (&shell{log: t.sh.log, env: env}).run(nsRouter, "busybox", "ash", filepath.Join(g.openwrt, "test", "start-sqm"))
}

func (b qosBackend) start(g *guest, t *topo, sc *scenario) (string, error) {
	return b.run(g, t, sc, false)
}
func (b qosBackend) stop(g *guest, t *topo, sc *scenario) (string, error) {
	return b.run(g, t, sc, true)
}

// installPackage puts the OpenWrt package's files where the package
// installs them (openwrt/sqmkit/Makefile) into a router root, with the
// lab's sqmkit as /usr/bin/sqmkit.
func installPackage(g *guest, root string) error {
	files := filepath.Join(g.openwrt, "sqmkit", "files")
	dests := map[string]string{
		"sqmkit.init":         "etc/init.d/sqmkit",
		"sqmkit.hotplug":      "etc/hotplug.d/iface/12-sqmkit",
		"functions.sh":        "usr/lib/sqmkit/functions.sh",
		"qos.sh":              "usr/lib/sqmkit/qos.sh",
		"sqmkit-nss.qos":      "usr/lib/sqm/sqmkit-nss.qos",
		"sqmkit-cake.qos":     "usr/lib/sqm/sqmkit-cake.qos",
		"sqmkit-fq_codel.qos": "usr/lib/sqm/sqmkit-fq_codel.qos",
	}
	for from, to := range dests {
		b, err := os.ReadFile(filepath.Join(files, from))
		if err != nil {
			return err
		}
		dst := filepath.Join(root, to)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			return err
		}
	}
	bin := filepath.Join(root, "usr/bin/sqmkit")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.Remove(bin)
	return os.Symlink(g.tools.sqmkit, bin)
}
