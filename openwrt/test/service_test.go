package openwrttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
	"github.com/sqmkit/sqmkit/openwrt/stack"
)

// sqmkit's service on real procd: installed and started by `sqmkit
// install`, shaping at boot from /etc/rc.d, reloaded by procd's config
// trigger when a uci commit over ubus changes /etc/config/sqm (what
// LuCI's Save & Apply does), stopped by its init script.
func TestInitScript(t *testing.T) {
	r := newRouter(t)
	// a fresh install: the defaults wrote a disabled queue; the service runs
	// and shapes nothing, which is no error
	if code, out := r.initd("start"); code != 0 || !strings.Contains(out, "nothing to shape") || strings.Contains(out, "sqmkit start:") {
		t.Errorf("start with no queue enabled: exit %d\n%s", code, out)
	}
	if _, ok := r.service("sqmkit"); !ok {
		t.Fatal("procd does not know the service after install")
	}
	if !r.exists("/etc/rc.d/S50sqmkit") {
		t.Fatal("install did not enable the service")
	}
	if code, _ := r.initd("enabled"); code != 0 {
		t.Errorf("enabled after install: exit %d", code)
	}
	// procd holds the service's reload trigger on /etc/config/sqm
	s, _ := r.service("sqmkit")
	trigger := `["config.change",["if",["eq","package","sqm"],["run_script","/etc/init.d/sqmkit","reload"]],1000]`
	if len(s.Triggers) != 1 || !sameJSON(s.Triggers[0], trigger) {
		t.Errorf("procd's triggers %s, want %s", s.Triggers, trigger)
	}

	// a queue enabled, then a reboot: procd's rcS runs S50sqmkit boot
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	if err := r.Reboot(); err != nil {
		t.Fatal(err)
	}
	if !r.shaped("wan") || !r.ingress("wan") {
		t.Fatalf("after the boot, the kernel holds:\n%s\n%s", r.qdiscs(), r.console())
	}
	if code, out := r.status(); code != 0 {
		t.Errorf("status after boot: exit %d\n%s", code, out)
	}

	// start again: already as planned, nothing changes
	before := r.qdiscs()
	if code, out := r.initd("start"); code != 0 || !strings.Contains(out, "already shaped as planned") {
		t.Errorf("second start: exit %d\n%s", code, out)
	}
	if r.qdiscs() != before {
		t.Error("a second start changed the kernel")
	}

	// LuCI's Save & Apply: uci set and commit over ubus; rpcd tells procd,
	// whose trigger reloads the service a second later
	for _, c := range [][]string{
		{"ubus", "call", "uci", "set", `{"config":"sqm","section":"wan","values":{"download":"30000"}}`},
		{"ubus", "call", "uci", "commit", `{"config":"sqm"}`},
	} {
		if code, out := r.run(nil, c[0], c[1:]...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", c, code, out)
		}
	}
	r.eventually("the committed rate in the kernel", func() bool { return strings.Contains(r.qdiscs(), "30Mbit") }, r.qdiscs)
	if code, out := r.status(); code != 0 {
		t.Errorf("status after the triggered reload: exit %d\n%s", code, out)
	}
	// disabled by a commit: the trigger's reload removes the queue
	r.run(nil, "uci", "set", "sqm.wan.enabled=0")
	r.run(nil, "ubus", "call", "uci", "commit", `{"config":"sqm"}`)
	r.eventually("the disabled queue removed", func() bool { return !r.shaped("wan") && !r.ingress("wan") }, r.qdiscs)

	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	if code, out := r.initd("restart"); code != 0 || !r.shaped("wan") {
		t.Errorf("restart: exit %d\n%s", code, out)
	}
	if code, out := r.initd("stop"); code != 0 || r.shaped("wan") {
		t.Errorf("stop: exit %d\n%s\n%s", code, r.qdiscs(), out)
	}
	// procd keeps a deleted service until its instance has exited
	r.eventually("procd drops the service after stop", func() bool {
		_, ok := r.service("sqmkit")
		return !ok
	}, func() string { s, _ := r.service("sqmkit"); return toJSON(s) })
	if code, _ := r.initd("disable"); code != 0 || r.exists("/etc/rc.d/S50sqmkit") {
		t.Errorf("disable: exit %d", code)
	}
	if code, _ := r.initd("enabled"); code == 0 {
		t.Error("enabled after disable")
	}
}

// A queue with option autorate '1' gets a procd instance of sqmkit
// autorate, respawned when it dies, whichever service applies the tree:
// with sqm-scripts' service enabled (as luci-app-sqm enables it) sqmkit's
// applies nothing and still runs autorate. A reload without the option
// describes the service with the watch's instance in its place, and one
// with option watch '0' with none.
func TestAutorateInstance(t *testing.T) {
	for _, withSQM := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqmkit's service", true: "sqm-scripts enabled"}[withSQM], func(t *testing.T) {
			r := newRouter(t)
			if withSQM {
				r.withSQMScripts()
			}
			q := queue{section: "wan", iface: "wan", script: "sqmkit-nss.qos", enabled: true, download: 20000, upload: 10000}
			q.extra = "\toption autorate '1'\n\toption autorate_reflectors '192.0.2.2'\n"
			r.config(q)
			if withSQM {
				if code, out := r.rc("sqm", "start"); code != 0 {
					t.Fatalf("sqm start: exit %d\n%s", code, out)
				}
			}
			if code, out := r.initd("restart"); code != 0 {
				t.Fatalf("restart: exit %d\n%s", code, out)
			}
			var pid int
			r.eventually("autorate running", func() bool {
				s, _ := r.service("sqmkit")
				inst, ok := s.Instances["autorate-wan"]
				pid = inst.PID
				return ok && inst.Running
			}, func() string { s, _ := r.service("sqmkit"); return r.console() + "\n" + toJSON(s) })
			s, _ := r.service("sqmkit")
			inst := s.Instances["autorate-wan"]
			if want := []string{"/usr/bin/sqmkit", "autorate", "--root", "/", "wan"}; !slices.Equal(inst.Command, want) || inst.Respawn == nil {
				t.Errorf("instance %+v, want %q respawned", inst, want)
			}
			if pid == 0 {
				t.Fatal("no pid for the instance")
			}
			// procd's pid is the namespace's: kill it from inside
			if code, out := r.run(nil, "kill", "-9", strconv.Itoa(pid)); code != 0 {
				t.Fatalf("kill: %s", out)
			}
			r.eventually("autorate respawned", func() bool {
				s, _ := r.service("sqmkit")
				i := s.Instances["autorate-wan"]
				return i.Running && i.PID != pid && i.PID != 0
			}, func() string { s, _ := r.service("sqmkit"); return toJSON(s) })

			q.extra = "\toption autorate_reflectors '192.0.2.2'\n"
			r.config(q) // autorate gone: the watch looks after the queue instead
			if code, out := r.initd("reload"); code != 0 {
				t.Fatalf("reload: exit %d\n%s", code, out)
			}
			r.eventually("autorate ended, the watch runs", func() bool {
				s, _ := r.service("sqmkit")
				_, auto := s.Instances["autorate-wan"]
				w, ok := s.Instances["watch-wan"]
				return !auto && ok && w.Running && slices.Equal(w.Command, []string{"/usr/bin/sqmkit", "watch", "--root", "/", "wan"})
			}, func() string { s, _ := r.service("sqmkit"); return r.console() + "\n" + toJSON(s) })
			q.extra = "\toption watch '0'\n"
			r.config(q) // and with option watch '0', nothing runs
			if code, out := r.initd("reload"); code != 0 {
				t.Fatalf("reload: exit %d\n%s", code, out)
			}
			r.eventually("the instances ended", func() bool {
				s, _ := r.service("sqmkit")
				return len(s.Instances) == 0
			}, func() string { s, _ := r.service("sqmkit"); return toJSON(s) })
		})
	}
}

// sqmkit's hotplug handler with the events real netifd sends: ifup when
// it brings wan up, ifdown when wan's device goes away (as pppoe-wan does
// when a PPPoE session drops), and storms of ifupdate through the real
// hotplug-call, one after the other and at once.
func TestHotplug(t *testing.T) {
	r := newRouter(t)
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	r.initd("disable")
	r.initd("stop")
	// the service is disabled: netifd's events are ignored
	r.run(nil, "/sbin/ifup", "wan")
	r.waitUp("wan", true)
	if r.shaped("wan") {
		t.Fatalf("ifup with the service disabled shaped wan")
	}
	r.initd("enable")
	// events that are not interface changes are ignored
	if code, _ := r.run([]string{"ACTION=free", "INTERFACE=wan"}, "/sbin/hotplug-call", "iface"); code != 0 || r.shaped("wan") {
		t.Fatalf("ACTION=free: exit %d", code)
	}
	// netifd restarts wan (ifdown, ifup): the shaper comes with the ifup
	r.run(nil, "/sbin/ifup", "wan")
	r.eventually("shaped after netifd's ifup", func() bool { return r.shaped("wan") && r.ingress("wan") }, r.qdiscs)
	// netifd's ifdown of a static wan leaves its device up: the shaper
	// stays on a device that is still there (the next ifup finds it as
	// planned)
	r.run(nil, "/sbin/ifdown", "wan")
	r.waitUp("wan", false)
	if !r.shaped("wan") {
		t.Errorf("ifdown of a static wan removed the shaper of a device that is up:\n%s", r.qdiscs())
	}
	r.run(nil, "/sbin/ifup", "wan")
	r.waitUp("wan", true)

	// a storm of ifupdate events, one after the other as netifd sends them:
	// nothing is applied again
	for i := range 10 {
		if _, out := r.event("ifupdate", "wan6", "wan"); strings.Contains(out, "started") {
			t.Errorf("event %d re-applied an unchanged tree:\n%s", i, out)
		}
	}
	// and the same from processes at once (a user, procd, netifd): the
	// locks keep one change at a time
	var wg sync.WaitGroup
	outs := make([]string, 20)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, outs[i] = r.event("ifupdate", "wan6", "wan")
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if strings.Contains(out, "started") {
			t.Errorf("concurrent event %d re-applied an unchanged tree:\n%s", i, out)
		}
	}
	if code, out := r.status(); code != 0 {
		t.Errorf("after the storm: %s", out)
	}
	// an alias interface going down leaves the shaper of a device that is up
	if code, out := r.event("ifdown", "wan6", ""); code != 0 || !r.shaped("wan") {
		t.Errorf("ifdown of wan6 while wan is up: exit %d\n%s", code, out)
	}
	// the device goes away: netifd's ifdown removes what sqmkit added (the
	// nss backend keeps its IFB, without a tree); it comes back: netifd's
	// ifup shapes it again
	r.ip("link", "del", "wan")
	r.waitUp("wan", false)
	r.eventually("nothing left of a device that went away", func() bool { return !r.shaped("ifb@wan") }, r.qdiscs)
	r.ip("link", "add", "wan", "type", "veth", "peer", "name", "wanpeer")
	r.ip("link", "set", "wanpeer", "up")
	r.eventually("shaped when the device came back", func() bool { return r.shaped("wan") && r.ingress("wan") }, r.qdiscs)
	if code, out := r.status(); code != 0 {
		t.Errorf("status after the device came back: exit %d\n%s", code, out)
	}
}

// waitUp waits until netifd says iface is up (or down).
func (r *router) waitUp(iface string, up bool) {
	r.t.Helper()
	want := fmt.Sprintf(`"up": %v`, up)
	r.eventually("netifd's "+iface+" "+want, func() bool { return strings.Contains(r.ifstatus(iface), want) }, func() string { return r.ifstatus(iface) })
}

// ifstatus is netifd's view of an interface.
func (r *router) ifstatus(iface string) string {
	_, out := r.run(nil, "ifstatus", iface)
	return out
}

// The first-boot defaults with the real uci: the WAN device from
// network.wan.device when it is a device name, the NSS script on an NSS
// router, an existing /etc/config/sqm kept. Each case runs the script on a
// scratch root inside the router ($IPKG_INSTROOT), so /sys can hold the NSS
// module's directory.
func TestUCIDefaults(t *testing.T) {
	r := newBareRouter(t, nil)
	r.install()
	for _, c := range []struct {
		name       string
		uci, nss   bool
		device     string // network.wan.device
		existing   bool
		iface, scr string
	}{
		{"no uci on PATH", false, false, "", false, "wan", "sqmkit-cake.qos"},
		{"network.wan.device from uci", true, false, "eth1", false, "eth1", "sqmkit-cake.qos"},
		{"NSS router", true, true, "eth1", false, "eth1", "sqmkit-nss.qos"},
		{"existing config is kept", true, false, "eth1", true, "", ""},
		// a value that would end the quoted option and add lines of its own
		{"a device value that is no device name", true, false, "eth1'\n\toption enabled '1", false, "wan", "sqmkit-cake.qos"},
	} {
		t.Run(c.name, func(t *testing.T) {
			scratch := "/tmp/" + strings.ReplaceAll(c.name, " ", "-")
			r.write(scratch+"/etc/config/network", "config interface 'wan'\n\toption device \""+c.device+"\"\n\toption proto 'dhcp'\n")
			if c.nss {
				os.MkdirAll(r.Path(scratch+"/sys/module/qca_nss_qdisc"), 0o755)
			}
			if c.existing {
				r.write(scratch+"/etc/config/sqm", "# mine\n")
			}
			r.write(scratch+"/defaults", string(readOwn(t, "sqmkit.uci-defaults")))
			path := "PATH=" + "/usr/sbin:/usr/bin:/sbin:/bin"
			if !c.uci {
				path = "PATH=/bin" // busybox's applets, and no /sbin/uci
			}
			if code, out := r.run([]string{path, "IPKG_INSTROOT=" + scratch}, "/bin/sh", scratch+"/defaults"); code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			if c.existing {
				if b, _ := os.ReadFile(r.Path(scratch + "/etc/config/sqm")); string(b) != "# mine\n" {
					t.Errorf("an existing config was changed: %q", b)
				}
				return
			}
			qs, err := config.Load(r.Path(scratch), "")
			if err != nil || len(qs) != 1 {
				t.Fatalf("the written config: %v %+v", err, qs)
			}
			q := qs[0]
			if q.Enabled || q.Interface != c.iface || q.Script != c.scr {
				t.Errorf("queue %+v, want disabled on %s with %s", q, c.iface, c.scr)
			}
		})
	}
}

// readOwn reads one of sqmkit's OpenWrt files from this checkout.
func readOwn(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../internal/openwrt/files", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every shell file of the package passes shellcheck as the POSIX sh that
// busybox ash runs.
func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		tctest.Missing(t, "needs shellcheck (installed by scripts/deps.sh)")
	}
	files, _ := filepath.Glob("../../internal/openwrt/files/*")
	files = slices.DeleteFunc(files, func(f string) bool {
		st, err := os.Stat(f)
		return err != nil || st.IsDir() || strings.HasSuffix(f, ".help") || strings.HasSuffix(f, ".qos")
	})
	// the LuCI app's one shell file: the rpcd plugin's wrapper
	files = append(files, "../../internal/openwrt/files/luci/root/usr/libexec/rpcd/sqmkit")
	// SC1091: sourced files are not at their router paths here; SC3043:
	// local is in every shell OpenWrt ships (busybox ash)
	out, err := exec.Command(sc, append([]string{"-s", "sh", "-e", "SC1091,SC3043"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
	// the .qos scripts are sourced by sqm-scripts: one line each
	qos, _ := filepath.Glob("../../internal/openwrt/files/*.qos")
	out, err = exec.Command(sc, append([]string{"-s", "sh", "-e", "SC1091"}, qos...)...).CombinedOutput()
	if err != nil || len(qos) != 3 {
		t.Errorf("shellcheck of %v: %v\n%s", qos, err, out)
	}
	// the project's own scripts (the stack's build among them)
	scripts, _ := filepath.Glob("../../scripts/*.sh")
	out, err = exec.Command(sc, append([]string{"-x", "-P", "../..", "-s", "sh"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck of scripts/: %v\n%s", err, out)
	}
}

// sameJSON compares a JSON value with want's, whatever the spacing and
// escaping (jshn writes "\/" and spaces).
func sameJSON(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

func toJSON(v any) string { b, _ := json.MarshalIndent(v, "", " "); return string(b) }

// A wan with proto dhcp: netifd's udhcpc gets a lease from a DHCP server
// past the link (busybox's udhcpd in a namespace of its own), netifd sends
// ifup and sqmkit's hotplug handler shapes; the lease released (ifdown) and
// taken again (ifup), the shaper is as planned again.
func TestDHCP(t *testing.T) {
	srv := fmt.Sprintf("sqmkit-dhcp-%d", os.Getpid())
	exec.Command("ip", "netns", "del", srv).Run()
	if err := ipAll([]string{"netns", "add", srv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", srv).Run() })
	dir := t.TempDir()
	conf := filepath.Join(dir, "udhcpd.conf")
	os.WriteFile(conf, []byte("start 192.0.2.100\nend 192.0.2.150\ninterface wanpeer\nlease_file "+filepath.Join(dir, "leases")+
		"\npidfile "+filepath.Join(dir, "pid")+"\noption subnet 255.255.255.0\noption router 192.0.2.2\noption lease 600\n"), 0o644)
	b := build(t)
	sr := stack.New(t, stack.Options{
		Netns: func(ns string) error {
			return ipAll([]string{"link", "add", "wan", "netns", ns, "type", "veth", "peer", "name", "wanpeer", "netns", srv},
				[]string{"-n", srv, "addr", "add", "192.0.2.2/24", "dev", "wanpeer"}, []string{"-n", srv, "link", "set", "wanpeer", "up"})
		},
		Setup: func(root string) error {
			dhcp := strings.Replace(network, "\toption proto 'static'\n\toption ipaddr '192.0.2.1'\n\toption netmask '255.255.255.0'\n", "\toption proto 'dhcp'\n", 1)
			if err := os.WriteFile(filepath.Join(root, "etc/config/network"), []byte(dhcp), 0o644); err != nil {
				return err
			}
			os.Rename(filepath.Join(root, "usr/sbin/tc"), filepath.Join(root, "sbin/tc"))
			if err := copyFile(filepath.Join(b, "tc"), filepath.Join(root, "usr/sbin/tc"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, "usr/sbin/tc.env"), []byte("SQMKIT_REAL_TC=/sbin/tc\nSQMKIT_SHIM_FQ_CODEL=pfifo\n"), 0o644)
		},
	})
	udhcpd := exec.Command("ip", "netns", "exec", srv, "busybox", "udhcpd", "-f", conf)
	if err := udhcpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udhcpd.Process.Kill(); udhcpd.Wait() })
	r := &router{t: t, Router: sr}
	r.rc("sqm", "disable")
	r.install()
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	r.run(nil, "/sbin/ifup", "wan")
	r.eventually("a lease and the shaper", func() bool {
		return strings.Contains(r.ifstatus("wan"), "192.0.2.1") && r.shaped("wan") && r.ingress("wan")
	}, func() string { return r.ifstatus("wan") + r.qdiscs() })
	if code, out := r.status(); code != 0 {
		t.Errorf("status after the lease: exit %d\n%s", code, out)
	}
	r.run(nil, "/sbin/ifdown", "wan")
	r.waitUp("wan", false)
	r.run(nil, "/sbin/ifup", "wan")
	r.eventually("a new lease, shaped as planned", func() bool {
		code, _ := r.status()
		return strings.Contains(r.ifstatus("wan"), `"up": true`) && code == 0
	}, func() string { _, out := r.status(); return r.ifstatus("wan") + out })
}
