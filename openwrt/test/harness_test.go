// Package openwrttest runs sqmkit's OpenWrt files (internal/openwrt/files)
// under busybox ash, as OpenWrt runs them, against the real sqmkit binary
// (the router build, as the package builds it) on a scratch root
// ($IPKG_INSTROOT) and a real kernel in a network namespace. What only an
// OpenWrt box has is stood in for by the trees beside this file, laid out
// where OpenWrt keeps them: base/ (rc.common, functions.sh, procd.sh, a
// ubus that records what procd is sent, hotplug-call, uci) and
// sqm-scripts/ (its init script, hotplug handler, run.sh, start-sqm and
// stop-sqm, installed where `make install-openwrt` puts them). Each
// stand-in's comment lists what it does as the real one does; docs/hacking.md
// says how they were checked against the real files. With
// SQMKIT_OPENWRT_REAL=DIR, the files of the root tree DIR replace the
// stand-ins (a local check against the real ones; never in CI).
package openwrttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// router is one scratch OpenWrt root with the package installed, and the
// namespace whose kernel it shapes.
type router struct {
	t    *testing.T
	root string // IPKG_INSTROOT
	bin  string // PATH's first entry: tc (the tc shim), sh (busybox)
	ns   *tctest.Netns
	ubus string // what procd was sent, one `ubus` call a line
}

var (
	buildOnce sync.Once
	built     string // dir with sqmkit (router build) and tc (the tc shim)
	buildErr  error
)

func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sqmkit-openwrt")
		if err != nil {
			buildErr = err
			return
		}
		for _, b := range [][]string{
			{"go", "build", "-tags", "router", "-o", filepath.Join(dir, "sqmkit"), "../../cmd/sqmkit"},
			{"go", "build", "-o", filepath.Join(dir, "tc"), "../../internal/tc/tcshim"},
		} {
			if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("%v: %v\n%s", b, err, out)
				return
			}
		}
		built = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func busybox(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tctest.Missing(t, "needs busybox (installed by scripts/deps.sh)")
	return ""
}

// newBareRouter is a scratch OpenWrt root with OpenWrt's own pieces (the
// stand-ins of base/) and the namespace with a device "wan", without the
// package.
func newBareRouter(t *testing.T) *router {
	t.Helper()
	tctest.NeedRoot(t)
	bb := busybox(t)
	b := build(t)
	r := &router{t: t, root: t.TempDir(), bin: t.TempDir(), ns: tctest.NewNetns(t, "owrt")}
	r.ubus = filepath.Join(r.bin, "ubus.log")
	copyTree(t, "base", r.root)
	if dir := os.Getenv("SQMKIT_OPENWRT_REAL"); dir != "" {
		t.Logf("SQMKIT_OPENWRT_REAL: OpenWrt's own files from %s replace the stand-ins", dir)
		copyTree(t, dir, r.root)
	}
	copyFile(t, filepath.Join(b, "tc"), filepath.Join(r.bin, "tc"), 0o755)
	if err := os.Symlink(bb, filepath.Join(r.bin, "sh")); err != nil {
		t.Fatal(err)
	}
	r.write("etc/openwrt_release", "DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='24.10.0'\nDISTRIB_ARCH='x86_64'\n")
	for _, d := range []string{"etc/rc.d", "etc/config", "var/run", "var/lock"} {
		if err := os.MkdirAll(filepath.Join(r.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// the live /sys (the namespace's, under ip netns exec), as sqmkit's
	// --root reads it on a router
	if err := os.Symlink("/sys", filepath.Join(r.root, "sys")); err != nil {
		t.Fatal(err)
	}
	return r
}

// newRouter is newBareRouter with the package installed the way its
// Makefile's install section says.
func newRouter(t *testing.T) *router {
	t.Helper()
	r := newBareRouter(t)
	installFromMakefile(t, r.root)
	copyFile(t, filepath.Join(build(t), "sqmkit"), filepath.Join(r.root, "usr/bin/sqmkit"), 0o755)
	return r
}

// withSQMScripts installs the sqm-scripts stand-ins where sqm-scripts'
// `make install-openwrt` puts its files, its service enabled as
// luci-app-sqm enables it.
func (r *router) withSQMScripts() *router {
	copyTree(r.t, "sqm-scripts", r.root)
	if dir := os.Getenv("SQMKIT_OPENWRT_REAL"); dir != "" {
		copyTree(r.t, dir, r.root)
	}
	if code, out := r.rc("sqm", "enable"); code != 0 {
		r.t.Fatalf("enable sqm: exit %d\n%s", code, out)
	}
	return r
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the files of dir into root at the same relative paths,
// keeping their modes.
func copyTree(t testing.TB, dir, root string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		copyFile(t, p, filepath.Join(root, rel), info.Mode().Perm())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// makefileInstalls reads the $(INSTALL_BIN) and $(INSTALL_DATA) lines of the
// feed Makefile's Package/sqmkit/install: source file (in this checkout),
// destination under the root, and mode.
func makefileInstalls(t testing.TB, pkg string) []installed {
	t.Helper()
	mk, err := os.ReadFile("../" + pkg + "/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+):=(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = m[2]
	}
	expand := func(s string) string {
		for i := 0; i < 4; i++ {
			s = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(s, func(v string) string {
				name := v[2 : len(v)-1]
				switch name {
				case "CURDIR":
					return "../" + pkg
				case "INSTALL_BIN", "INSTALL_DATA", "INSTALL_DIR", "1":
					return v
				}
				return vars[name]
			})
		}
		return s
	}
	block := string(mk)
	block = block[strings.Index(block, "define Package/"+pkg+"/install"):]
	block = block[:strings.Index(block, "endef")]
	block = strings.ReplaceAll(block, "\\\n", " ")
	var out []installed
	for _, m := range regexp.MustCompile(`\$\((INSTALL_BIN|INSTALL_DATA)\)\s+(.*)`).FindAllStringSubmatch(block, -1) {
		args := strings.Fields(expand(m[2]))
		dest := strings.TrimPrefix(args[len(args)-1], "$(1)/")
		mode := os.FileMode(0o644)
		if m[1] == "INSTALL_BIN" {
			mode = 0o755
		}
		for _, src := range args[:len(args)-1] {
			to := dest
			if strings.HasSuffix(dest, "/") {
				to = dest + filepath.Base(src)
			}
			out = append(out, installed{src, to, mode})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s's Makefile installs no file", pkg)
	}
	return out
}

type installed struct {
	src, dst string
	mode     os.FileMode
}

// installFromMakefile performs the Makefile's install lines, so a file the
// Makefile forgets (or names wrong) fails here too.
func installFromMakefile(t testing.TB, root string) {
	t.Helper()
	for _, f := range makefileInstalls(t, "sqmkit") {
		copyFile(t, f.src, filepath.Join(root, f.dst), f.mode)
	}
}

func (r *router) write(path, text string) {
	r.t.Helper()
	p := filepath.Join(r.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// queue is one section of /etc/config/sqm.
type queue struct {
	section, iface, script string
	enabled                bool
	download, upload       int
	extra                  string // further option lines
}

func (q queue) String() string {
	en := "0"
	if q.enabled {
		en = "1"
	}
	return fmt.Sprintf("\nconfig queue '%s'\n\toption enabled '%s'\n\toption interface '%s'\n\toption download '%d'\n\toption upload '%d'\n\toption script '%s'\n\toption linklayer 'none'\n%s",
		q.section, en, q.iface, q.download, q.upload, q.script, q.extra)
}

// config writes /etc/config/sqm with these queues.
func (r *router) config(qs ...queue) {
	var b strings.Builder
	for _, q := range qs {
		b.WriteString(q.String())
	}
	r.write("etc/config/sqm", b.String())
}

// queue writes /etc/config/sqm with one queue, section wan on wan.
func (r *router) queue(enabled bool, script string, download, upload int) {
	r.config(queue{section: "wan", iface: "wan", script: script, enabled: enabled, download: download, upload: upload})
}

// sh runs busybox ash with args in the namespace, with the router's
// environment (and extra), and returns the exit code and output.
func (r *router) sh(extra []string, args ...string) (int, string) {
	r.t.Helper()
	path := r.bin
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin"} {
		path += ":" + filepath.Join(r.root, d)
	}
	path += ":/usr/sbin:/usr/bin:/sbin:/bin"
	env := []string{"PATH=" + path, "IPKG_INSTROOT=" + r.root, "PROCD_LOG=" + r.ubus, "SQMKIT_SHIM_FQ_CODEL=pfifo"}
	if lib := os.Getenv("LD_LIBRARY_PATH"); lib != "" && os.Getenv("SQMKIT_OPENWRT_REAL") != "" {
		env = append(env, "LD_LIBRARY_PATH="+lib) // the real jshn and uci, built locally
	}
	full := append([]string{"netns", "exec", r.ns.Name, "env", "-i"}, append(append(env, extra...), append([]string{busybox(r.t), "ash"}, args...)...)...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		r.t.Fatal(err)
	}
	return 0, string(out)
}

// rc runs /etc/init.d/SERVICE ACTION through rc.common, as the init
// script's #! line does.
func (r *router) rc(service, action string) (int, string) {
	return r.sh(nil, filepath.Join(r.root, "etc/rc.common"), filepath.Join(r.root, "etc/init.d", service), action)
}

// initd runs sqmkit's init script.
func (r *router) initd(action string) (int, string) { return r.rc("sqmkit", action) }

// event is what netifd does on an interface event: hotplug-call iface
// with ACTION and INTERFACE, and DEVICE only on ifup and ifupdate. netifd
// runs one event at a time.
func (r *router) event(action, iface, dev string) (int, string) {
	env := []string{"ACTION=" + action, "INTERFACE=" + iface}
	if action == "ifup" || action == "ifupdate" {
		env = append(env, "DEVICE="+dev)
	}
	return r.sh(env, filepath.Join(r.root, "sbin/hotplug-call"), "iface")
}

// sqmkit runs the installed binary on the router's root.
func (r *router) sqmkit(args ...string) (int, string) {
	full := append([]string{args[0], "--root", r.root}, args[1:]...)
	return r.sh(nil, append([]string{"-c", `exec "$IPKG_INSTROOT/usr/bin/sqmkit" "$@"`, "sqmkit"}, full...)...)
}

// status is `sqmkit status`: 0 when the kernel holds the plan.
func (r *router) status() (int, string) { return r.sqmkit("status") }

// qdiscs is what the kernel holds on every device of the namespace.
func (r *router) qdiscs() string { return r.ns.Exec(r.t, "tc", "qdisc", "show") }

// shaped reports a root qdisc sqmkit builds (handle 1:) on dev.
func (r *router) shaped(dev string) bool {
	return strings.Contains(r.qdiscs(), " 1: dev "+dev+" root")
}

// ingress reports an ingress qdisc on dev.
func (r *router) ingress(dev string) bool {
	return strings.Contains(r.qdiscs(), "qdisc ingress ffff: dev "+dev+" ")
}

// link reports whether a device exists in the namespace.
func (r *router) link(dev string) bool {
	return exec.Command("ip", "-n", r.ns.Name, "link", "show", "dev", dev).Run() == nil
}

// addLink adds a veth pair dev <-> dev+"p", both up.
func (r *router) addLink(dev string) {
	r.ns.Exec(r.t, "ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	r.ns.Exec(r.t, "ip", "link", "set", dev, "up")
	r.ns.Exec(r.t, "ip", "link", "set", dev+"p", "up")
}

// procdCalls are the ubus calls procd was sent, as (method, message).
func (r *router) procdCalls() []procdCall {
	r.t.Helper()
	var out []procdCall
	for _, l := range lines(r.t, r.ubus) {
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 || f[0] != "call" || f[1] != "service" {
			r.t.Fatalf("ubus was called as %q", l)
		}
		c := procdCall{Method: f[2]}
		if err := json.Unmarshal([]byte(f[3]), &c.Msg); err != nil {
			r.t.Fatalf("ubus call service %s: the message is not JSON (%v): %s", f[2], err, f[3])
		}
		out = append(out, c)
	}
	return out
}

func (r *router) clearProcd() { os.WriteFile(r.ubus, nil, 0o644) }

type procdCall struct {
	Method string
	Msg    struct {
		Name      string                     `json:"name"`
		Script    string                     `json:"script"`
		Instance  string                     `json:"instance"`
		Instances map[string]procdInstance   `json:"instances"`
		Triggers  []json.RawMessage          `json:"triggers"`
		Data      map[string]json.RawMessage `json:"data"`
	}
}

type procdInstance struct {
	Command []string `json:"command"`
	Respawn []string `json:"respawn"`
	Stderr  bool     `json:"stderr"`
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		out = append(out, sc.Text())
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
