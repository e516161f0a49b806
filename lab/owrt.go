package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
	"github.com/sqmkit/sqmkit/openwrt/stack"
)

// The lab's router as OpenWrt's real userland (openwrt/stack: procd as
// PID 1 of its own namespaces in the router's network namespace, booting
// ubusd, rpcd, netifd, uhttpd with LuCI and sqm-scripts from /etc/rc.d),
// built by the host (scripts/openwrt-stack.sh) and copied onto the
// guest's tmpfs. Three uses: the .qos scenarios run sqm-scripts' own
// service (network disabled: the lab owns the router's addresses), the PPPoE
// scenario lets netifd's ppp proto dial and redial the session, and the
// router owner's journey (journey.go) is driven through LuCI in a
// browser on the host.

// owrtBootLimit is a boot under the emulated CPU: about 20 s on a quiet host.
const owrtBootLimit = 3 * time.Minute

// owrtRouter is OpenWrt booted in the router namespace.
type owrtRouter struct {
	*stack.Router
	logs string // where its console is copied when it halts
}

// bootOpenWrt boots the stack in the router namespace with these UCI
// files (network, sqm: "" keeps the stack's own) and setup's changes.
func (g *guest) bootOpenWrt(t *topo, name, network, sqm string, objects []string, setup func(root string) error) (*owrtRouter, error) {
	if g.stack == "" {
		return nil, errors.New("the plan names no OpenWrt stack (the host builds it with scripts/openwrt-stack.sh before the boot)")
	}
	dir := filepath.Join(t.dir, "owrt-"+name)
	if err := freshDir(dir); err != nil {
		return nil, err
	}
	r, err := stack.Boot(stack.Config{Stack: g.stack, Dir: dir, Netns: nsRouter, Boot: owrtBootLimit, Objects: objects, Setup: func(root string) error {
		files := map[string]string{"network": network, "sqm": sqm}
		for n, body := range files {
			if body == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(root, "etc/config", n), []byte(body), 0o644); err != nil {
				return err
			}
		}
		if setup != nil {
			return setup(root)
		}
		return nil
	}})
	o := &owrtRouter{Router: r, logs: filepath.Join(t.logs, "openwrt-"+name+"-console.log")}
	if err != nil {
		o.saveConsole()
		return nil, fmt.Errorf("booting OpenWrt in the router namespace: %w", err)
	}
	g.say("%s: OpenWrt booted in the router namespace (procd pid %d)", name, r.PID())
	return o, nil
}

// halt shuts it down and keeps its console and a look inside (diagnose)
// with the logs.
func (o *owrtRouter) halt() {
	o.diagnose()
	o.Halt()
	o.saveConsole()
}

// diagnose writes what the router holds beside its console: its
// processes, procd's services, ubus's objects, its network and qdiscs,
// its UCI files and the run state of sqm-scripts and sqmkit.
func (o *owrtRouter) diagnose() {
	var b strings.Builder
	for _, c := range []string{"ps w", "ubus list", "ubus call service list", "ip addr", "ip route", "tc qdisc show",
		"cat /etc/config/network /etc/config/sqm", "ls -lR /var/run/sqm /var/run/sqmkit", "rm -rf /tmp/dbgq; SQM_QDISC_STATE_DIR=/tmp/dbgq sh -x /usr/lib/sqm/update-available-qdiscs 2>&1 | grep -v \"level_\\|local \\|LEVEL\\|shift\\|sqm_logger\\|debug=\" | grep -i \"ifb\\|qdisc\\|RET=\\|ERROR\\|touch\\|return\" | head -60", "ifstatus wan", "logread 2>/dev/null | tail -n 100"} {
		out, err := o.Exec("/bin/sh", "-c", c)
		fmt.Fprintf(&b, "# %s (%v)\n%s\n", c, err, out)
	}
	os.WriteFile(strings.TrimSuffix(o.logs, "-console.log")+"-state.txt", []byte(b.String()), 0o644)
}

func (o *owrtRouter) saveConsole() {
	if b, err := os.ReadFile(o.Console); err == nil {
		os.WriteFile(o.logs, b, 0o644)
	}
}

// run runs a command inside the router, logging it.
func (o *owrtRouter) run(log io.Writer, name string, args ...string) (string, error) {
	out, err := o.Exec(name, args...)
	if log != nil {
		fmt.Fprintf(log, "# openwrt: %s %s (%v)\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), err
}

// installSqmkit runs `sqmkit install` on the running router, as the
// README has a user run it (the binary from /tmp; the lab's kernel has
// every module, so no package manager is asked: --no-deps).
func (o *owrtRouter) installSqmkit(g *guest, log io.Writer) error {
	if err := copyFile(g.tools.router, o.Path("/tmp/sqmkit"), 0o755); err != nil {
		return err
	}
	if out, err := o.run(log, "/tmp/sqmkit", "install", "--no-deps"); err != nil {
		return fmt.Errorf("sqmkit install: %v\n%s", err, out)
	}
	return nil
}

// tcShim puts the lab's NSS stand-in in front of the stack's tc, told
// through its env file what procd's services cannot be told through the
// environment (internal/tc/tcshim).
func (g *guest) tcShim(root string) error {
	if err := os.Rename(filepath.Join(root, "usr/sbin/tc"), filepath.Join(root, "sbin/tc")); err != nil {
		return err
	}
	if err := copyFile(g.tools.tcshim, filepath.Join(root, "usr/sbin/tc"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "usr/sbin/tc.env"), []byte("SQMKIT_REAL_TC=/sbin/tc\n"), 0o644)
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	os.Remove(to)
	return os.WriteFile(to, b, mode)
}

// waitUp waits until netifd says iface is up.
func (o *owrtRouter) waitUp(iface string, limit time.Duration) error {
	return waitFor(limit, func() bool {
		out, _ := o.Exec("ifstatus", iface)
		return strings.Contains(string(out), `"up": true`)
	})
}

// relay listens on addr in the guest's own namespace (where the host's
// forwarded port arrives) and relays each connection to to, dialled from
// inside the namespace ns: the browser on the host reaches the router's
// LAN side as a LAN client's would be reached (stack.ForwardTo).
func relay(ctx context.Context, addr, ns, to string) error {
	_, err := stack.ForwardTo(ctx, addr, "/run/netns/"+ns, to)
	return err
}

// hostNIC brings up the guest's user-mode network device (QEMU's
// hostfwd lands there), the one device of the guest's own namespace that
// is not lo, at QEMU's fixed guest address.
func hostNIC() error {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == "lo" {
			continue
		}
		for _, args := range [][]string{{"addr", "replace", "10.0.2.15/24", "dev", e.Name()}, {"link", "set", e.Name(), "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %v: %v: %s", args, err, out)
			}
		}
		return nil
	}
	return errors.New("the guest has no network device for the host's browser (the host boots it with one when a journey is planned)")
}

// readJSONFile decodes path into v.
func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// owrtPPPoE is the PPPoE scenario on real netifd: the router's wan is
// proto pppoe (netifd's ppp.sh runs pppd against the modem's
// pppoe-server), the queue on pppoe-wan; with each way of running it
// (backend "service": sqmkit's own service; "sqm-scripts": sqm-scripts'
// service with sqmkit-cake.qos), the session drops (the modem's pppd is
// ended), netifd redials, pppoe-wan is made again bare, and the shaper
// must follow through the real hotplug-call: status as planned within a
// minute of the new session.
// owrtWays are the ways the PPPoE scenario runs the queue.
var owrtWays = []string{"service", "sqm-scripts"}

func (g *guest) owrtPPPoE(p *profile.Profile, ways []string) []result {
	var rs []result
	for _, way := range ways {
		r := result{Profile: p.Name, Backend: "openwrt-pppoe:" + way, Date: time.Now().UTC().Format(time.RFC3339), Commit: g.commit, Kernel: g.kernel,
			Dir: filepath.Join(g.out, p.Name+"-openwrt", way)}
		os.MkdirAll(r.Dir, 0o755)
		r.ended(g.owrtPPPoEOne(p, way, &r))
		g.say("%s/openwrt-pppoe:%s: %s", p.Name, way, r.line())
		writeJSON(filepath.Join(r.Dir, "result.json"), &r)
		rs = append(rs, r)
	}
	return rs
}

func (g *guest) owrtPPPoEOne(p *profile.Profile, way string, r *result) error {
	if !p.Encap.PPPoE {
		return fmt.Errorf("the OpenWrt PPPoE scenario needs a PPPoE profile, not %s", p.Name)
	}
	if !slices.Contains(owrtWays, way) {
		return fmt.Errorf("openwrt-pppoe runs with sqmkit's service or with sqm-scripts, not %q", way)
	}
	logf, err := os.Create(filepath.Join(r.Dir, "commands.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	t, err := buildTopoFor(&shell{log: logf}, p, filepath.Join("/tmp/lab", p.Name+"-openwrt-"+way), r.Dir, true)
	if err != nil {
		return err
	}
	defer t.close()
	r.DownKbit, r.UpKbit = p.Down*95/100, p.Up*95/100
	sqm, network := routerUCI(p, pppIfname, "cake", "sqmkit-cake.qos", r.DownKbit, r.UpKbit)
	o, err := g.bootOpenWrt(t, way, network, sqm, nil, func(root string) error {
		// sqmkit as an image builder puts it there: install --root
		if err := copyFile(g.tools.router, filepath.Join(t.dir, "sqmkit-image"), 0o755); err != nil {
			return err
		}
		out, err := exec.Command(filepath.Join(t.dir, "sqmkit-image"), "install", "--no-deps", "--root", root).CombinedOutput()
		fmt.Fprintf(logf, "# sqmkit install --root %s\n%s", root, out)
		if err != nil {
			return fmt.Errorf("sqmkit install --root: %v\n%s", err, out)
		}
		if way == "service" {
			os.Remove(filepath.Join(root, "etc/rc.d/S50sqm")) // sqm-scripts' service disabled
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer o.halt()
	check := func(name string, ok bool, want string) {
		r.Checks = append(r.Checks, checkOf(name, ok, want))
	}
	asPlanned := func() bool {
		out, err := o.run(nil, "/usr/bin/sqmkit", "status")
		return err == nil && strings.Contains(out, "as planned")
	}
	// netifd dials at boot
	up := o.waitUp("wan", 90*time.Second) == nil && waitFor(30*time.Second, asPlanned) == nil
	if up {
		if err := t.modemRoute(); err != nil {
			return err
		}
	}
	first, _ := o.run(logf, "/usr/bin/sqmkit", "status")
	check("shaped as planned after netifd's first dial", up, "sqmkit status: as planned on pppoe-wan\n"+first)
	if !up {
		r.Status = status(r.Checks)
		return nil
	}
	before, _ := o.run(logf, "/sbin/ifstatus", "wan")
	// the session drops: the modem's pppd ends (LCP terminate, PADT)
	if _, err := t.sh.run(nsModem, "pkill", "-TERM", "-f", "pppd.*"+pppdKernelName); err != nil {
		t.sh.run(nsModem, "pkill", "-TERM", "pppd")
	}
	gone := waitFor(30*time.Second, func() bool {
		_, err := t.sh.run(nsRouter, "ip", "link", "show", "dev", pppIfname)
		return err != nil
	}) == nil
	check("pppoe-wan gone when the session dropped", gone, "netifd's pppd ended")
	back := o.waitUp("wan", 90*time.Second) == nil && waitFor(60*time.Second, asPlanned) == nil
	after, _ := o.run(logf, "/usr/bin/sqmkit", "status")
	o.run(logf, "/sbin/ifstatus", "wan")
	check("shaped as planned after netifd redialled", back, "sqmkit status: as planned on the new pppoe-wan\n"+after)
	if back {
		t.modemRoute()
	}
	fmt.Fprintf(logf, "# wan before the drop:\n%s\n", before)
	os.WriteFile(filepath.Join(r.Dir, "tc-after.txt"), []byte(t.tcStats()), 0o644)
	r.Status = status(r.Checks)
	return nil
}

// checkOf is a yes/no check.
func checkOf(name string, ok bool, want string) accept.Check {
	return accept.Check{Name: name, Got: one(ok), Want: want, OK: ok}
}

// prepareOpenWrt boots OpenWrt for a .qos scenario: its UCI files as LuCI
// writes them, its network service disabled (netifd would take the lab's
// devices down at its start; the lab keeps the addresses), the NSS tc
// stand-in in front of its tc for sqmkit-nss.qos, sqmkit installed on the
// running router; sqm-scripts' service is enabled (so sqmkit's own
// defers to it) but its queue only once the router is up, so the
// scenario's start is the first; the scenario's --root is the router's
// root as its processes see it.
func (g *guest) prepareOpenWrt(t *topo, q qosBackend, sc *scenario) (*scenario, error) {
	sqm, network := routerUCI(t.p, sc.dev, q.backend, q.script, sc.down, sc.up)
	off := strings.Replace(sqm, "option enabled '1'", "option enabled '0'", 1)
	// without netifd, ubus has no network object to wait for
	o, err := g.bootOpenWrt(t, strings.TrimSuffix(q.script, ".qos"), network, off, []string{"session", "uci", "service"}, func(root string) error {
		for _, l := range []string{"S20network", "K90network"} {
			os.Remove(filepath.Join(root, "etc/rc.d", l))
		}
		if q.backend == "nss" {
			return g.tcShim(root)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := o.installSqmkit(g, t.sh.log); err != nil {
		o.halt()
		return nil, err
	}
	if err := os.WriteFile(o.Path("/etc/config/sqm"), []byte(sqm), 0o644); err != nil {
		o.halt()
		return nil, err
	}
	sc.owrt, sc.root, sc.close = o, o.Path("/"), o.halt
	return sc, nil
}
