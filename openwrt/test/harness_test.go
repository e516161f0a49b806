// Package openwrttest runs sqmkit's OpenWrt files on OpenWrt's real
// userland (openwrt/stack: procd as PID 1, ubusd, rpcd, netifd, uhttpd,
// uci and sqm-scripts installed by its own make, all built from pinned
// sources), with sqmkit installed the way the README installs it: the
// router build run from /tmp as `sqmkit install`. The kernel is the host's,
// in the router's own network namespace; it has no fq_codel or cake, so
// the tc shim (internal/tc/tcshim) sits at /usr/sbin/tc and maps NSS and
// fq_codel leaves onto tbf and pfifo, the real tc at /sbin/tc behind it.
// The lab (lab/owrt.go) runs the same stack where a kernel with every
// qdisc and PPPoE is needed. What only a stand-in can run here is named
// where it is used.
package openwrttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/openwrt/stack"
)

var (
	buildOnce sync.Once
	built     string // dir with sqmkit (router build) and tc (the tc shim)
	buildErr  error
)

func build(t testing.TB) string {
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

// router is one booted OpenWrt whose namespace holds the veth pair wan <->
// wanpeer; network.wan is static on wan.
type router struct {
	t *testing.T
	*stack.Router
}

// network is /etc/config/network as config_generate writes it for a router
// whose WAN port is wan, with a static address (no DHCP server here).
const network = `
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config interface 'wan'
	option device 'wan'
	option proto 'static'
	option ipaddr '192.0.2.1'
	option netmask '255.255.255.0'
`

// newBareRouter boots the stack without sqmkit: sqm-scripts is installed
// and enabled, as in an image with luci-app-sqm; setup may change the
// root first.
func newBareRouter(t *testing.T, setup func(root string) error) *router {
	t.Helper()
	b := build(t)
	sr := stack.New(t, stack.Options{
		Netns: func(ns string) error {
			return ipAll(
				[]string{"-n", ns, "link", "add", "wan", "type", "veth", "peer", "name", "wanpeer"},
				[]string{"-n", ns, "link", "set", "wanpeer", "up"})
		},
		Setup: func(root string) error {
			if err := os.WriteFile(filepath.Join(root, "etc/config/network"), []byte(network), 0o644); err != nil {
				return err
			}
			// the shim in front of the real tc, told through its env file
			// what procd's services cannot be told through the environment
			if err := os.Rename(filepath.Join(root, "usr/sbin/tc"), filepath.Join(root, "sbin/tc")); err != nil {
				return err
			}
			if err := copyFile(filepath.Join(b, "tc"), filepath.Join(root, "usr/sbin/tc"), 0o755); err != nil {
				return err
			}
			env := "SQMKIT_REAL_TC=/sbin/tc\nSQMKIT_SHIM_FQ_CODEL=pfifo\n"
			if err := os.WriteFile(filepath.Join(root, "usr/sbin/tc.env"), []byte(env), 0o644); err != nil {
				return err
			}
			if setup != nil {
				return setup(root)
			}
			return nil
		},
	})
	return &router{t: t, Router: sr}
}

// newRouter boots the stack and installs sqmkit as the README does (the
// binary run from /tmp; no package manager here, so --no-deps), with
// sqm-scripts' service disabled so sqmkit's own applies the queues.
func newRouter(t *testing.T) *router {
	t.Helper()
	r := newBareRouter(t, nil)
	if code, out := r.rc("sqm", "disable"); code != 0 {
		t.Fatalf("sqm disable: exit %d\n%s", code, out)
	}
	r.install()
	return r
}

// install runs `sqmkit install --no-deps` on the running router.
func (r *router) install() {
	r.t.Helper()
	if err := copyFile(filepath.Join(build(r.t), "sqmkit"), r.Path("/tmp/sqmkit"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if code, out := r.run(nil, "/tmp/sqmkit", "install", "--no-deps"); code != 0 {
		r.t.Fatalf("sqmkit install: exit %d\n%s", code, out)
	}
}

// withSQMScripts enables sqm-scripts' service again.
func (r *router) withSQMScripts() *router {
	if code, out := r.rc("sqm", "enable"); code != 0 {
		r.t.Fatalf("enable sqm: exit %d\n%s", code, out)
	}
	return r
}

func ipAll(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// run runs a command inside the router with extra environment, and returns
// its exit code and combined output.
func (r *router) run(extra []string, name string, args ...string) (int, string) {
	r.t.Helper()
	out, err := r.Command(extra, name, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		r.t.Fatal(err)
	}
	return 0, string(out)
}

// sh runs an ash command line inside the router.
func (r *router) sh(extra []string, line string) (int, string) {
	return r.run(extra, "/bin/sh", "-c", line)
}

// write writes a file inside the router.
func (r *router) write(path, text string) {
	r.t.Helper()
	p := r.Path(path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// exists says whether path exists inside the router.
func (r *router) exists(path string) bool {
	_, err := os.Lstat(r.Path(path))
	return err == nil
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
	r.write("/etc/config/sqm", b.String())
}

// queue writes /etc/config/sqm with one queue, section wan on wan.
func (r *router) queue(enabled bool, script string, download, upload int) {
	r.config(queue{section: "wan", iface: "wan", script: script, enabled: enabled, download: download, upload: upload})
}

// rc runs /etc/init.d/SERVICE ACTION, through the real rc.common and procd.
func (r *router) rc(service, action string) (int, string) {
	return r.run(nil, "/etc/init.d/"+service, action)
}

// initd runs sqmkit's init script.
func (r *router) initd(action string) (int, string) { return r.rc("sqmkit", action) }

// event runs the real hotplug-call iface with what netifd passes: ACTION
// and INTERFACE, DEVICE only on ifup and ifupdate (tests that need no
// particular event order let netifd send them: ifup/ifdown).
func (r *router) event(action, iface, dev string) (int, string) {
	env := []string{"ACTION=" + action, "INTERFACE=" + iface}
	if action == "ifup" || action == "ifupdate" {
		env = append(env, "DEVICE="+dev)
	}
	return r.run(env, "/sbin/hotplug-call", "iface")
}

// sqmkit runs the installed binary.
func (r *router) sqmkit(args ...string) (int, string) { return r.run(nil, "/usr/bin/sqmkit", args...) }

// status is `sqmkit status`: 0 when the kernel holds the plan.
func (r *router) status() (int, string) { return r.sqmkit("status") }

// tc runs the host's real tc in the router's namespace (what the kernel
// holds, without the shim's names).
func (r *router) tc(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("tc", append([]string{"-n", r.Netns}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("tc %v: %v: %s", args, err, out)
	}
	return string(out)
}

// qdiscs is what the kernel holds on every device of the namespace.
func (r *router) qdiscs() string { return r.tc("qdisc", "show") }

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
	return exec.Command("ip", "-n", r.Netns, "link", "show", "dev", dev).Run() == nil
}

// ip runs ip in the router's namespace.
func (r *router) ip(args ...string) {
	r.t.Helper()
	if err := ipAll(append([]string{"-n", r.Netns}, args...)); err != nil {
		r.t.Fatal(err)
	}
}

// addLink adds a veth pair dev <-> dev+"p", both up.
func (r *router) addLink(dev string) {
	r.ip("link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	r.ip("link", "set", dev, "up")
	r.ip("link", "set", dev+"p", "up")
}

// service is what procd holds of a service: its instances (running, the
// command, respawn) and triggers, from `ubus call service list`.
type service struct {
	Instances map[string]struct {
		Running bool     `json:"running"`
		PID     int      `json:"pid"`
		Command []string `json:"command"`
		Respawn *struct {
			Threshold, Timeout, Retry int
		} `json:"respawn"`
	} `json:"instances"`
	Triggers []json.RawMessage `json:"triggers"`
}

// service asks procd for name; ok is false when procd has no such service.
func (r *router) service(name string) (service, bool) {
	r.t.Helper()
	code, out := r.run(nil, "ubus", "call", "service", "list", `{"name":"`+name+`","verbose":true}`)
	if code != 0 {
		r.t.Fatalf("ubus call service list: exit %d\n%s", code, out)
	}
	var all map[string]service
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		r.t.Fatalf("service list: %v\n%s", err, out)
	}
	s, ok := all[name]
	return s, ok
}

// eventually polls cond for up to 15 s (procd's triggers wait a second,
// then run the script), failing with what describe says.
func (r *router) eventually(what string, cond func() bool, describe func() string) {
	r.t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
	}
	r.t.Errorf("%s: not within 15 s\n%s", what, describe())
}

// logread is what the router's services wrote to the console (procd's
// log channel in this container), for failure messages.
func (r *router) console() string {
	b, _ := os.ReadFile(r.Console)
	if i := bytes.LastIndex(b, []byte("\n")); len(b) > 3000 && i > 0 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// lines reads a file's lines; a missing file has none.
func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
