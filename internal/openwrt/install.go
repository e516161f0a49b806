package openwrt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sqmkit/sqmkit/internal/statefile"
)

// Manifest lists, one absolute path a line, what Install wrote; Uninstall
// removes exactly those.
const Manifest = "usr/lib/sqmkit/installed"

// Binary is where the sqmkit binary goes.
const Binary = "usr/bin/sqmkit"

// Options configure Install and Uninstall.
type Options struct {
	// Self is the binary to install (os.Executable on a router).
	Self string
	// Deps: install the packages sqmkit needs (tc, ip, the IFB and qdisc
	// kmods) with the router's package manager when they are missing.
	Deps bool
	Out  io.Writer
	// Run runs a command with extra environment; nil runs it for real.
	Run func(env []string, name string, args ...string) error
}

func (o *Options) run(env []string, name string, args ...string) error {
	fmt.Fprintf(o.Out, "  running %s %s\n", name, strings.Join(args, " "))
	if o.Run != nil {
		return o.Run(env, name, args...)
	}
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), env...)
	c.Stdout, c.Stderr = o.Out, o.Out
	return c.Run()
}

// live says whether root is the running system, where services start and
// stop; under a scratch root (a firmware image being assembled, the tests)
// files are placed and links made, as opkg does offline.
func live(root string) bool { return filepath.Clean(root) == "/" }

func instroot(root string) []string {
	if live(root) {
		return []string{"IPKG_INSTROOT="}
	}
	return []string{"IPKG_INSTROOT=" + root}
}

// Install puts sqmkit on the OpenWrt system under root: the packages it
// needs (opts.Deps), the binary, its files, its default config on first
// install, the service enabled and (on the running system) started.
func Install(root string, o Options) error {
	if _, err := os.Stat(filepath.Join(root, "etc/openwrt_release")); err != nil {
		return fmt.Errorf("%s is not an OpenWrt system (no etc/openwrt_release); elsewhere run sqmkit as it is, or install the OpenWrt package into a firmware image", root)
	}
	pm := detect(root)
	if pm != nil && pm.has(root, "sqmkit") {
		return fmt.Errorf("sqmkit is installed as a package here; update or remove it with %s, not with sqmkit install", pm.name)
	}
	if o.Deps {
		if err := o.deps(root, pm); err != nil {
			return err
		}
	}
	files := Files
	luci := hasLuCI(root)
	if luci {
		files = append(slices.Clone(files), LuCIFiles...)
	}
	written := []string{"/" + Binary}
	for _, f := range files {
		written = append(written, "/"+f.Dst)
	}
	// The manifest first, naming all it will write (and what an earlier
	// install wrote): an install stopped halfway (a full flash) is still
	// one uninstall removes. What this one created is taken back on a
	// failure (TestInstallFullFlash).
	existed := map[string]bool{}
	for _, p := range written {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			existed[p] = true
		}
	}
	old, _ := os.ReadFile(filepath.Join(root, Manifest))
	hadManifest := len(old) > 0
	if err := writeFile(filepath.Join(root, Manifest), []byte(manifest(old, written)), 0o644); err != nil {
		return fmt.Errorf("install: writing %s: %w; nothing was installed", "/"+Manifest, err)
	}
	rollback := func(err error) error {
		for _, p := range written {
			if !existed[p] {
				os.Remove(filepath.Join(root, p))
			}
		}
		if !hadManifest {
			os.Remove(filepath.Join(root, Manifest))
		}
		return fmt.Errorf("%w; what this install wrote was taken back", err)
	}
	if err := installSelf(root, o.Self); err != nil {
		return rollback(fmt.Errorf("install %s: %w", "/"+Binary, err))
	}
	for _, f := range files {
		b, err := Read(f)
		if err == nil {
			err = writeFile(filepath.Join(root, f.Dst), b, f.Mode)
		}
		if err != nil {
			return rollback(fmt.Errorf("install %s: %w", f.Dst, err))
		}
	}
	fmt.Fprintf(o.Out, "installed %d files and %s\n", len(written)-1, "/"+Binary)
	// as opkg's postinst: the first-boot defaults run now, and go once done
	defaults := filepath.Join(root, "etc/uci-defaults/90-sqmkit")
	if err := o.run(instroot(root), "sh", defaults); err != nil {
		fmt.Fprintf(o.Out, "  the defaults did not run (%v); they run at the next boot\n", err)
	} else {
		os.Remove(defaults)
	}
	if err := enable(root); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "service sqmkit enabled (/etc/rc.d)")
	// LuCI caches its menu and the scripts it lists
	for _, g := range []string{"tmp/luci-indexcache*", "tmp/luci-modulecache"} {
		ms, _ := filepath.Glob(filepath.Join(root, g))
		for _, m := range ms {
			os.RemoveAll(m)
		}
	}
	if luci {
		fmt.Fprintln(o.Out, "luci-app-sqmkit installed: Network → SQM proof")
	}
	if !live(root) {
		return nil
	}
	if luci {
		// rpcd learns a plugin and reads its ACL when it starts again
		if err := o.run(nil, "/etc/init.d/rpcd", "reload"); err != nil {
			fmt.Fprintf(o.Out, "  rpcd did not reload (%v); the LuCI pages answer after a reboot\n", err)
		}
	}
	return o.run(nil, "/etc/init.d/sqmkit", "start")
}

// manifest is the manifest's text: the paths of an earlier one and these,
// each once.
func manifest(old []byte, paths []string) string {
	var all []string
	for _, l := range strings.Split(string(old), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "/") && !slices.Contains(all, l) {
			all = append(all, l)
		}
	}
	for _, p := range paths {
		if !slices.Contains(all, p) {
			all = append(all, p)
		}
	}
	return strings.Join(all, "\n") + "\n"
}

// hasLuCI says whether LuCI's client-side views are installed (luci-base).
func hasLuCI(root string) bool {
	_, err := os.Stat(filepath.Join(root, "www/luci-static/resources/luci.js"))
	return err == nil
}

func installSelf(root, self string) error {
	dst := filepath.Join(root, Binary)
	if a, err := os.Stat(self); err != nil {
		return fmt.Errorf("the binary to install: %w", err)
	} else if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
		return nil // reinstalling the files from the installed binary
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	return writeFile(dst, b, 0o755)
}

// writeFile replaces path whole (a rename), so a running binary or a script
// being sourced is never seen half written.
func writeFile(path string, b []byte, mode fs.FileMode) error {
	return statefile.Write(path, b, mode)
}

var startLine = regexp.MustCompile(`(?m)^START=(\d\d)$`)

// enable makes the link rc.common's enable makes: S<START>sqmkit.
func enable(root string) error {
	b, err := os.ReadFile(filepath.Join(root, "etc/init.d/sqmkit"))
	if err != nil {
		return err
	}
	m := startLine.FindSubmatch(b)
	if m == nil {
		return errors.New("etc/init.d/sqmkit has no START=NN line")
	}
	dir := filepath.Join(root, "etc/rc.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	link := filepath.Join(dir, "S"+string(m[1])+"sqmkit")
	os.Remove(link)
	return os.Symlink("../init.d/sqmkit", link)
}

// StopServices, before an uninstall, stops what runs sqmkit's files: its
// own service on the running system (procd then ends autorate), and every
// queue sqm-scripts started with a sqmkit-*.qos script, through
// sqm-scripts' own run.sh, so its state files go with the trees.
func StopServices(root string, o Options) {
	if live(root) {
		if _, err := os.Stat("/etc/init.d/sqmkit"); err == nil {
			if err := o.run(nil, "/etc/init.d/sqmkit", "stop"); err != nil {
				fmt.Fprintf(o.Out, "  stopping the service: %v\n", err)
			}
		}
	}
	states, _ := filepath.Glob(filepath.Join(root, "var/run/sqm/*.state"))
	for _, st := range states {
		b, err := os.ReadFile(st)
		if err != nil || !bytes.Contains(b, []byte(`SCRIPT="sqmkit-`)) {
			continue
		}
		iface := strings.TrimSuffix(filepath.Base(st), ".state")
		if err := o.run(instroot(root), "sh", filepath.Join(root, "usr/lib/sqm/run.sh"), "stop", iface); err != nil {
			fmt.Fprintf(o.Out, "  sqm-scripts' stop of %s: %v\n", iface, err)
		}
	}
}

// Uninstall removes what Install wrote, the service's links and sqmkit's
// runtime state; /etc/config/sqm stays (it is the user's, and sqm-scripts'
// too). Call StopServices, and remove the trees, first.
func Uninstall(root string, o Options) error {
	b, err := os.ReadFile(filepath.Join(root, Manifest))
	if errors.Is(err, fs.ErrNotExist) {
		if pm := detect(root); pm != nil && pm.has(root, "sqmkit") {
			return fmt.Errorf("sqmkit is installed as a package here; remove it with %s", pm.name)
		}
		// removed already (a second uninstall), or never installed: done
		fmt.Fprintf(o.Out, "sqmkit is not installed here (no %s): nothing to remove\n", "/"+Manifest)
		return nil
	}
	if err != nil {
		return err
	}
	links, _ := filepath.Glob(filepath.Join(root, "etc/rc.d/[SK][0-9][0-9]sqmkit"))
	for _, l := range links {
		os.Remove(l)
	}
	n := 0
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		p := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
			continue // not a line Install writes
		}
		if err := os.Remove(filepath.Join(root, p)); err == nil {
			n++
		} else if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(o.Out, "  %s: %v\n", p, err)
		}
	}
	os.Remove(filepath.Join(root, Manifest))
	for _, d := range []string{"usr/lib/sqmkit", "var/run/sqmkit"} {
		os.RemoveAll(filepath.Join(root, d))
	}
	fmt.Fprintf(o.Out, "removed %d files, the service links and sqmkit's runtime state; /etc/config/sqm is kept\n", n)
	return nil
}
