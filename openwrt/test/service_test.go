package openwrttest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func TestInitScript(t *testing.T) {
	r := newRouter(t)
	// a fresh install: no queue enabled yet is not an error
	r.queue(false, "sqmkit-nss.qos", 20000, 10000)
	if code, out := r.initd("start"); code != 0 || !strings.Contains(out, "nothing to shape") || strings.Contains(out, "sqmkit start:") {
		t.Errorf("start with no queue enabled: exit %d\n%s", code, out)
	}
	r.clearProcd()
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)

	if code, out := r.initd("enable"); code != 0 || !fileExists(filepath.Join(r.root, "etc/rc.d/S50sqmkit")) {
		t.Fatalf("enable: exit %d\n%s", code, out)
	}
	if code, _ := r.initd("enabled"); code != 0 {
		t.Errorf("enabled after enable: exit %d", code)
	}

	code, out := r.initd("boot")
	if code != 0 || !r.shaped("wan") {
		t.Fatalf("boot: exit %d, kernel:\n%s\n%s", code, r.qdiscs(), out)
	}
	if code, out := r.status(); code != 0 {
		t.Errorf("status after boot: exit %d\n%s", code, out)
	}
	// procd is sent the service, its reload trigger on /etc/config/sqm and
	// the "data" object every service message carries
	calls := r.procdCalls()
	if len(calls) != 1 || calls[0].Method != "set" {
		t.Fatalf("procd was sent %+v, want one service set", calls)
	}
	m := calls[0].Msg
	trigger := `["config.change",["if",["eq","package","sqm"],["run_script","/etc/init.d/sqmkit","reload"]],1000]`
	if m.Name != "sqmkit" || m.Script != filepath.Join(r.root, "etc/init.d/sqmkit") || len(m.Instances) != 0 ||
		len(m.Triggers) != 1 || !sameJSON(m.Triggers[0], trigger) || m.Data == nil {
		t.Errorf("service message %+v, want name sqmkit, its script, no instance, trigger %s and data {}", m, trigger)
	}

	// start again: already as planned, nothing changes
	before := r.qdiscs()
	if code, out := r.initd("start"); code != 0 || !strings.Contains(out, "already shaped as planned") {
		t.Errorf("second start: exit %d\n%s", code, out)
	}
	if r.qdiscs() != before {
		t.Error("a second start changed the kernel")
	}

	// a changed rate reaches the kernel on reload
	r.queue(true, "sqmkit-nss.qos", 30000, 10000)
	if code, out := r.initd("reload"); code != 0 || !strings.Contains(r.qdiscs(), "30Mbit") {
		t.Errorf("reload with a new download rate: exit %d\n%s\n%s", code, r.qdiscs(), out)
	}
	if code, out := r.status(); code != 0 {
		t.Errorf("status after reload: exit %d\n%s", code, out)
	}
	// a disabled queue is removed on reload
	r.queue(false, "sqmkit-nss.qos", 30000, 10000)
	if code, out := r.initd("reload"); code != 0 || r.shaped("wan") {
		t.Errorf("reload with the queue disabled: exit %d\n%s\n%s", code, r.qdiscs(), out)
	}

	r.queue(true, "sqmkit-nss.qos", 20000, 10000)
	if code, out := r.initd("restart"); code != 0 || !r.shaped("wan") {
		t.Errorf("restart: exit %d\n%s", code, out)
	}
	r.clearProcd()
	if code, out := r.initd("stop"); code != 0 || r.shaped("wan") {
		t.Errorf("stop: exit %d\n%s\n%s", code, r.qdiscs(), out)
	}
	if calls := r.procdCalls(); len(calls) != 1 || calls[0].Method != "delete" || calls[0].Msg.Name != "sqmkit" {
		t.Errorf("stop did not ask procd to delete the service's instances: %+v", calls)
	}
	if code, _ := r.initd("disable"); code != 0 || fileExists(filepath.Join(r.root, "etc/rc.d/S50sqmkit")) {
		t.Errorf("disable: exit %d", code)
	}
	if code, _ := r.initd("enabled"); code == 0 {
		t.Error("enabled after disable")
	}
}

// A queue with option autorate '1' gets a procd instance of sqmkit
// autorate, respawned, whichever service applies the tree: with
// sqm-scripts' service enabled (as luci-app-sqm enables it) sqmkit's
// service applies nothing and still runs autorate. A reload without the
// option describes the service without the instance, which procd then ends.
func TestAutorateInstance(t *testing.T) {
	for _, withSQM := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqmkit's service", true: "sqm-scripts enabled"}[withSQM], func(t *testing.T) {
			r := newRouter(t)
			if withSQM {
				r.withSQMScripts()
			}
			q := queue{section: "wan", iface: "wan", script: "sqmkit-cake.qos", enabled: true, download: 20000, upload: 10000}
			q.extra = "\toption autorate '1'\n"
			r.config(q)
			if code, out := r.initd("start"); code != 0 {
				t.Fatalf("start: exit %d\n%s", code, out)
			}
			calls := r.procdCalls()
			if len(calls) != 1 {
				t.Fatalf("procd was sent %+v", calls)
			}
			inst, ok := calls[0].Msg.Instances["autorate-wan"]
			want := []string{filepath.Join(r.root, "usr/bin/sqmkit"), "autorate", "--root", r.root, "wan"}
			if !ok || !slices.Equal(inst.Command, want) || !slices.Equal(inst.Respawn, []string{"3600", "5", "0"}) || !inst.Stderr {
				t.Errorf("instances %+v, want autorate-wan running %q, respawned for ever, stderr to the log", calls[0].Msg.Instances, want)
			}
			r.clearProcd()
			q.extra = ""
			r.config(q) // autorate gone
			if code, out := r.initd("reload"); code != 0 {
				t.Fatalf("reload: exit %d\n%s", code, out)
			}
			calls = r.procdCalls()
			if len(calls) != 1 || calls[0].Method != "set" || len(calls[0].Msg.Instances) != 0 {
				t.Errorf("reload without autorate: procd was sent %+v", calls)
			}
		})
	}
}

// sqmkit's own hotplug handler, with the events netifd sends: DEVICE on
// ifup and ifupdate only, one event at a time.
func TestHotplug(t *testing.T) {
	r := newRouter(t)
	r.queue(true, "sqmkit-nss.qos", 20000, 10000)

	// the service is disabled: events are ignored
	if code, _ := r.event("ifup", "wan", "wan"); code != 0 || r.shaped("wan") {
		t.Fatalf("ifup with the service disabled: exit %d, shaped %v", code, r.shaped("wan"))
	}
	r.initd("enable")
	// events that are not interface changes are ignored
	if code, _ := r.sh([]string{"ACTION=free", "INTERFACE=wan"}, filepath.Join(r.root, "sbin/hotplug-call"), "iface"); code != 0 || r.shaped("wan") {
		t.Fatalf("ACTION=free: exit %d", code)
	}
	if code, out := r.event("ifup", "wan", "wan"); code != 0 || !r.shaped("wan") {
		t.Fatalf("ifup: exit %d\n%s", code, out)
	}

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
	// the device down: ifdown (without DEVICE) removes what sqmkit added
	r.ns.Exec(t, "ip", "link", "set", "wan", "down")
	if code, out := r.event("ifdown", "wan", ""); code != 0 || r.shaped("wan") || r.ingress("wan") {
		t.Errorf("ifdown with wan down: exit %d\n%s\n%s", code, r.qdiscs(), out)
	}
}

func TestUCIDefaults(t *testing.T) {
	for _, c := range []struct {
		name       string
		uci, nss   bool
		device     string // network.wan.device
		existing   bool
		iface, scr string
	}{
		{"plain, no uci", false, false, "", false, "wan", "sqmkit-cake.qos"},
		{"network.wan.device from uci", true, false, "eth1", false, "eth1", "sqmkit-cake.qos"},
		{"NSS router", true, true, "eth1", false, "eth1", "sqmkit-nss.qos"},
		{"existing config is kept", true, false, "eth1", true, "", ""},
		// a value that would end the quoted option and add lines of its own
		{"a device value that is no device name", true, false, "eth1'\n\toption enabled '1", false, "wan", "sqmkit-cake.qos"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRouter(t)
			if !c.uci {
				os.Remove(filepath.Join(r.root, "bin/uci"))
			}
			r.write("etc/config/network", "config interface 'wan'\n\toption device \""+c.device+"\"\n\toption proto 'dhcp'\n")
			if c.nss {
				os.Remove(filepath.Join(r.root, "sys")) // a scratch /sys, not the live one
				os.MkdirAll(filepath.Join(r.root, "sys/module/qca_nss_qdisc"), 0o755)
			}
			if c.existing {
				r.write("etc/config/sqm", "# mine\n")
			}
			if code, out := r.sh(nil, filepath.Join(r.root, "etc/uci-defaults/90-sqmkit")); code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			if c.existing {
				if b, _ := os.ReadFile(filepath.Join(r.root, "etc/config/sqm")); string(b) != "# mine\n" {
					t.Errorf("an existing config was changed: %q", b)
				}
				return
			}
			qs, err := config.Load(r.root, "")
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

// Every shell file of the package, and every stand-in, passes shellcheck
// as the POSIX sh that busybox ash runs.
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
	for _, dir := range []string{"base", "sqm-scripts"} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		})
	}
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
}

// sameJSON compares a JSON value with want's, whatever the spacing and
// escaping (jshn writes "\/" and spaces).
func sameJSON(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}
