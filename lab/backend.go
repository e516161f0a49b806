package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/openwrt"
)

// backend is what a shaped scenario starts and stops in the router
// namespace: one of sqmkit's backends through `sqmkit start`, one of the
// OpenWrt package's .qos scripts through sqm-scripts' calling convention,
// or an external shaper (ext:NAME=DIR).
type backend interface {
	// name is how the command line and the results name it.
	name() string
	// kind is sqmkit's backend underneath (nss, cake, fq_codel), "" for a
	// foreign shaper.
	kind() string
	// command is how to start it (stop false) or stop it in the router
	// namespace; the lab runs and measures it.
	command(g *guest, sc *scenario, stop bool) (command, error)
}

// command is a program and the environment it adds.
type command struct {
	env  []string
	args []string
}

// scenario is one backend's run on one topology: its router root and the
// rates the lab gives it.
type scenario struct {
	root     string      // the router's --root (IPKG_INSTROOT)
	owrt     *owrtRouter // OpenWrt booted for the scenario (.qos), nil otherwise
	close    func()      // what ends with the scenario
	env      []string
	dev      string   // the device the queue names
	down, up int      // shaper rates, kbit/s
	lab      []string // the documented LAB_* environment of external backends
}

// sqmkitBackends are sqmkit's own, started with `sqmkit start --root`;
// cake_mq is cake with use_mq (plain cake where the kernel or tc lacks it).
var sqmkitBackends = []string{"fq_codel", "cake", "nss", "cake_mq"}

// qosPrefix names a .qos script of the OpenWrt package as a backend:
// qos:sqmkit-cake.qos. extPrefix names an external one: ext:NAME=DIR.
const (
	qosPrefix = "qos:"
	extPrefix = "ext:"
)

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
	case strings.HasPrefix(s, extPrefix):
		return parseExt(strings.TrimPrefix(s, extPrefix))
	}
	return nil, fmt.Errorf("unknown backend %q (want none, %s, qos:sqmkit-BACKEND.qos or ext:NAME=DIR)", s, strings.Join(sqmkitBackends, ", "))
}

type sqmkitBackend string

func (b sqmkitBackend) name() string { return string(b) }
func (b sqmkitBackend) kind() string { return string(b) }

func (b sqmkitBackend) command(g *guest, sc *scenario, stop bool) (command, error) {
	verb := "start"
	if stop {
		verb = "stop"
	}
	return command{args: []string{routerSqmkit(sc.root), verb, "--root", sc.root}}, nil
}

// qosBackend runs a .qos script of the OpenWrt package through the real
// sqm-scripts: OpenWrt's userland booted in the router namespace
// (owrt.go, netifd idle), sqmkit installed in it, and sqm-scripts'
// service started and stopped by its init script under procd.
type qosBackend struct{ script, backend string }

func (b qosBackend) name() string { return qosPrefix + b.script }
func (b qosBackend) kind() string { return b.backend }

func (b qosBackend) command(g *guest, sc *scenario, stop bool) (command, error) {
	verb := "start"
	if stop {
		verb = "stop"
	}
	return command{args: sc.owrt.Command(nil, "/etc/init.d/sqm", verb).Args}, nil
}

// routerSqmkit is where a router root holds its sqmkit.
func routerSqmkit(root string) string { return filepath.Join(root, "usr/bin/sqmkit") }

// installSqmkit puts the router build of sqmkit (the OpenWrt package's
// binary) into a router root as a new file: on the guest's tmpfs, like a
// router's root filesystem, its pages stay cached between starts, and a new
// copy is read and translated afresh, like the first start after a boot.
func installSqmkit(g *guest, root string) error {
	dst := routerSqmkit(root)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	src, err := os.Open(g.tools.router)
	if err != nil {
		return err
	}
	defer src.Close()
	os.Remove(dst)
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// installPackage puts the OpenWrt package's files where the package
// installs them (internal/openwrt, as openwrt/sqmkit/Makefile does) into a
// router root; its sqmkit is installSqmkit's. The hotplug scenario runs the
// package's own hotplug script on it.
func installPackage(g *guest, root string) error {
	for _, f := range openwrt.Files {
		b, err := openwrt.Read(f)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, f.Dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, f.Mode); err != nil {
			return err
		}
	}
	if _, err := os.Stat(routerSqmkit(root)); err == nil {
		return nil
	}
	return installSqmkit(g, root)
}
