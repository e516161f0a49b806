package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/lab/internal/linkemu"
	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// Namespaces and addresses of the lab:
//
//	client c0 ── lan  router  wan[.N] / pppoe-wan ── m0[.N] modem m1 ── s0 server
//	10.1.0.2     10.1.0.1     10.2.0.1              10.2.0.2    10.3.0.1   10.3.0.2
const (
	nsClient, nsRouter, nsModem, nsServer = "client", "router", "modem", "server"
	serverIP                              = "10.3.0.2"
	routerIP, modemIP                     = "10.2.0.1", "10.2.0.2"                // the WAN link's two ends
	serverIP6, routerIP6, modemWANIP6     = "fd00:3::2", "fd00:2::1", "fd00:2::2" // IPv6 (tune -6): WAN and server links only
	pppIfname                             = "pppoe-wan"                           // OpenWrt's name for network.wan's PPP device
	wanPort                               = "wan"                                 // the router's physical modem-facing port
)

// ipv6 gives the WAN and server links IPv6 for `sqmkit-lab tune -6`: ULA
// addresses without duplicate address detection (usable at once), the
// modem forwarding. The client's LAN stays IPv4, so the grade after a tune
// is the same test as every other scenario's. `replace`, not `add`: every
// backend of a profile asks again on the same topology. Not on PPPoE
// profiles (the host refuses them): the lab's pppd negotiates no IPv6CP.
func (t *topo) ipv6() error {
	if err := t.sh.must(nsRouter, []string{"ip", "-6", "addr", "replace", routerIP6 + "/64", "dev", t.wanDev, "nodad"},
		[]string{"ip", "-6", "route", "replace", "default", "via", modemWANIP6}); err != nil {
		return err
	}
	if err := t.sh.must(nsModem, []string{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		[]string{"ip", "-6", "addr", "replace", modemWANIP6 + "/64", "dev", t.modemLower(), "nodad"},
		[]string{"ip", "-6", "addr", "replace", "fd00:3::1/64", "dev", "m1", "nodad"}); err != nil {
		return err
	}
	return t.sh.must(nsServer, []string{"ip", "-6", "addr", "replace", serverIP6 + "/64", "dev", "s0", "nodad"},
		[]string{"ip", "-6", "route", "replace", "default", "via", "fd00:3::1"})
}

// guestModules are what the scenarios load in the guest kernel.
var guestModules = []string{"sch_cake", "sch_fq_codel", "sch_netem", "sch_htb", "sch_tbf", "sch_ingress", "sch_plug",
	"ifb", "act_mirred", "cls_u32", "8021q", "pppoe", "pppox", "ppp_generic", "veth", "virtio_net"}

// topo is one built lab for a profile.
type topo struct {
	sh     *shell
	p      *profile.Profile
	dir    string // scratch dir on the guest's tmpfs
	logs   string // daemon logs, in the results dir
	wanDev string // the device sqmkit shapes (wan, wan.7 or pppoe-wan)
	procs  []*proc
	pppd   *proc // the router's PPPoE client, when the profile has one
	owrt   bool  // the router's network is netifd's (owrt.go)
	// target is what `sqmkit test` grades against: the server namespace's
	// sqmkit serve when empty, else these arguments (a responsiveness
	// server's config URL, rpm.go)
	target  []string
	refURL  string            // the reference responsiveness server's config URL, once started (rpm.go)
	public  *refserver.Public // the public default impersonated, once started (rpm.go)
	backend bool              // their /slurp's backend runs
}

// shapedDev is the device sqmkit's queue names (UCI sqm interface). NSS
// shapers sit on the physical port, where frames still carry their
// Ethernet, VLAN and PPPoE headers, so nsstbl's byte count holds most of
// the framing (the worked example of docs/design.md: interface wan, network wan proto
// pppoe device wan.7). The CPU backends shape the logical WAN device
// (pppoe-wan), as sqm-scripts users do, and pay the framing through stab.
func (t *topo) shapedDev(backend string) string {
	if backend == "nss" {
		return wanPort
	}
	return t.wanDev
}

// wanLower is the router's Ethernet-level WAN device (VLAN when tagged).
func (t *topo) wanLower() string {
	if t.p.Encap.VLAN > 0 {
		return fmt.Sprintf("%s.%d", wanPort, t.p.Encap.VLAN)
	}
	return wanPort
}

func (t *topo) modemLower() string {
	if t.p.Encap.VLAN > 0 {
		return fmt.Sprintf("m0.%d", t.p.Encap.VLAN)
	}
	return "m0"
}

// freshDir empties the lab's scratch directory dir: an earlier build's
// router roots would be half of this one's (the hotplug scenario's second
// pass, secondPass, failed on the first pass's rc.d symlink).
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

// wanQueues is the WAN port's TX and RX queue count: the guest's vCPUs.
const wanQueues = "2"

func buildTopo(sh *shell, p *profile.Profile, dir, logs string) (*topo, error) {
	return buildTopoFor(sh, p, dir, logs, false)
}

// buildTopoFor builds the lab; with owrt the router's addresses, routes,
// VLAN device and PPPoE client are left to the OpenWrt booted there
// (netifd), and only the modem's side of them is made.
func buildTopoFor(sh *shell, p *profile.Profile, dir, logs string, owrt bool) (*topo, error) {
	t := &topo{sh: sh, p: p, dir: dir, logs: logs, owrt: owrt}
	if err := freshDir(dir); err != nil {
		return nil, err
	}
	for _, ns := range []string{nsClient, nsRouter, nsModem, nsServer} {
		sh.run("", "ip", "netns", "del", ns) // a previous profile's leftovers
		if _, err := sh.run("", "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		if err := sh.must(ns, []string{"ip", "link", "set", "lo", "up"},
			[]string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}); err != nil {
			return nil, err
		}
	}
	pairs := [][4]string{{nsClient, "c0", nsRouter, "lan"}, {nsRouter, wanPort, nsModem, "m0"}, {nsModem, "m1", nsServer, "s0"}}
	for _, pr := range pairs {
		// The WAN port has a queue per vCPU, as a router's NIC has one per
		// core: cake_mq spreads over them, the others replace the mq root.
		q := []string{}
		if pr[3] != "lan" {
			q = []string{"numtxqueues", wanQueues, "numrxqueues", wanQueues}
		}
		add := append(append([]string{"ip", "link", "add", pr[1]}, q...), "netns", pr[0], "type", "veth", "peer", "name", pr[3])
		if _, err := sh.run("", append(append(add, q...), "netns", pr[2])...); err != nil {
			return nil, err
		}
		for _, end := range [][2]string{{pr[0], pr[1]}, {pr[2], pr[3]}} {
			// Without TSO/GSO the hosts send wire-sized packets, so the
			// modem's stab and tbf see real frames instead of 64 KB bursts,
			// and without GRO the router and modem forward them as they are.
			// The end hosts keep GRO on receive, as real NICs do: it sets
			// how many ACKs flow back (per GRO batch, not per two segments).
			gro := "off"
			if end[1] == "c0" || end[1] == "s0" {
				gro = "on"
			}
			if err := sh.must(end[0], []string{"ethtool", "-K", end[1], "tso", "off", "gso", "off", "gro", gro},
				[]string{"ip", "link", "set", end[1], "up"}); err != nil {
				return nil, err
			}
		}
	}
	if err := sh.must(nsClient, []string{"ip", "addr", "add", "10.1.0.2/24", "dev", "c0"},
		[]string{"ip", "route", "add", "default", "via", "10.1.0.1"}); err != nil {
		return nil, err
	}
	if err := sh.must(nsServer, []string{"ip", "addr", "add", serverIP + "/24", "dev", "s0"},
		[]string{"ip", "route", "add", "default", "via", "10.3.0.1"}); err != nil {
		return nil, err
	}
	if !owrt {
		if err := sh.must(nsRouter, []string{"ip", "addr", "add", "10.1.0.1/24", "dev", "lan"}); err != nil {
			return nil, err
		}
	}
	if err := sh.must(nsModem, []string{"ip", "addr", "add", "10.3.0.1/24", "dev", "m1"}); err != nil {
		return nil, err
	}
	if v := t.p.Encap.VLAN; v > 0 {
		// Default VLAN devices: the tag stays in skb metadata through the
		// port's qdisc (see profile.Encap.HeaderBytes), as on any Linux
		// router; reorder_hdr off would put it in but breaks PPPoE receive.
		id := fmt.Sprint(v)
		ends := [][3]string{{nsRouter, wanPort, t.wanLower()}, {nsModem, "m0", t.modemLower()}}
		if owrt {
			ends = ends[1:] // netifd makes the router's (config device)
		}
		for _, end := range ends {
			if err := sh.must(end[0], []string{"ip", "link", "add", "link", end[1], "name", end[2], "type", "vlan", "id", id},
				[]string{"ip", "link", "set", end[2], "up"}); err != nil {
				return nil, err
			}
		}
	}
	if t.p.Encap.PPPoE {
		if err := t.pppoe(); err != nil {
			return nil, err
		}
	} else {
		t.wanDev = t.wanLower()
		if !owrt {
			if err := sh.must(nsRouter, []string{"ip", "addr", "add", "10.2.0.1/24", "dev", t.wanDev},
				[]string{"ip", "route", "add", "default", "via", "10.2.0.2"}); err != nil {
				return nil, err
			}
		}
		if err := sh.must(nsModem, []string{"ip", "addr", "add", "10.2.0.2/24", "dev", t.modemLower()},
			[]string{"ip", "route", "add", "10.1.0.0/24", "via", routerIP}); err != nil {
			return nil, err
		}
	}
	// The bottleneck: shaping on the Ethernet devices themselves, so VLAN
	// and PPPoE frames pay their headers.
	if err := sh.batch(nsModem, "tc", append(linkemu.Batch(t.p, "m0", config.Download), linkemu.Batch(t.p, "m1", config.Upload)...)); err != nil {
		return nil, err
	}
	return t, nil
}

// pppoe brings up a real PPPoE session: pppoe-server in the modem (its
// sessions moved to kernel mode by the pppd wrapper), pppd with the
// rp-pppoe plugin in the router as OpenWrt's netifd runs it, and waits for
// the router's PPP device to get its address.
func (t *topo) pppoe() error {
	os.MkdirAll("/run/lock", 0o755) // pppd's "lock" from /etc/ppp/options
	// The host's /etc/ppp/options says "auth"; the lab has no secrets, so
	// both ends say noauth. The up/down scripts of the host must not run.
	common := "noauth\nnoipv6\nnoipdefault\nnoccp\nnovj\nnovjccomp\nnodeflate\nnobsdcomp\nlcp-echo-interval 0\nmtu 1492\nmru 1492\nip-up-script /bin/true\nip-down-script /bin/true\n"
	srvOpts := filepath.Join(t.dir, "pppoe-server-options")
	srvLog := "logfile " + filepath.Join(t.logs, "pppd-server.log") + "\ndebug\n"
	if err := os.WriteFile(srvOpts, []byte(common+srvLog), 0o644); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	wrapper := filepath.Join(t.dir, pppdKernelName)
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s %s \"$@\"\n", self, pppdKernelName, filepath.Join(t.logs, pppdKernelName+".log"))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	p, err := t.sh.daemon(nsModem, filepath.Join(t.logs, "pppoe-server.log"), "pppoe-server", "-F", "-q", wrapper, "-I", t.modemLower(),
		"-L", modemIP, "-R", routerIP, "-N", "4", "-O", srvOpts)
	if err != nil {
		return err
	}
	t.procs = append(t.procs, p)
	t.wanDev = pppIfname
	if t.owrt {
		return nil // netifd's ppp proto dials (owrt.go)
	}
	plugin, err := pppoePlugin()
	if err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	args := []string{"pppd", "nodetach", "plugin", plugin, "nic-" + t.wanLower(), "ifname", pppIfname,
		"user", "lab", "password", "lab", "defaultroute", "persist", "maxfail", "0", "holdoff", "1"}
	args = append(args, strings.Fields(strings.ReplaceAll(common, "\n", " "))...)
	c, err := t.sh.daemon(nsRouter, filepath.Join(t.logs, "pppd.log"), args...)
	if err != nil {
		return err
	}
	t.procs = append(t.procs, c)
	t.pppd = c
	t.wanDev = pppIfname
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return fmt.Errorf("pppd exited: see %s", filepath.Join(t.logs, "pppd.log"))
		case <-p.done:
			return fmt.Errorf("pppoe-server exited: see %s", filepath.Join(t.logs, "pppoe-server.log"))
		default:
		}
		if t.pppUp() {
			return t.modemRoute()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("PPPoE session did not come up within 40 s (see pppd.log and pppoe-server.log in %s)", t.logs)
}

// pppUp reports the router's PPP device holding its address.
func (t *topo) pppUp() bool {
	out, _ := t.sh.run(nsRouter, "ip", "-4", "addr", "show", "dev", pppIfname)
	return strings.Contains(out, routerIP)
}

// modemRoute routes the LAN over the modem's current PPP device:
// pppoe-server names its side ppp0, ppp1, ... anew on every session.
func (t *topo) modemRoute() error {
	out, err := t.sh.run(nsModem, "ip", "-o", "-4", "addr", "show", "to", modemIP)
	f := strings.Fields(out)
	if err != nil || len(f) < 2 {
		return fmt.Errorf("modem has no PPP device with 10.2.0.2: %v", err)
	}
	_, err = t.sh.run(nsModem, "ip", "route", "replace", "10.1.0.0/24", "dev", f[1])
	return err
}

func pppoePlugin() (string, error) {
	for _, pat := range []string{"/usr/lib/pppd/*/rp-pppoe.so", "/usr/lib/pppd/*/pppoe.so"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[len(m)-1], nil
		}
	}
	return "", fmt.Errorf("no pppd PPPoE plugin under /usr/lib/pppd (install ppp)")
}

// close stops the lab's daemons and removes its namespaces.
func (t *topo) close() {
	for _, p := range t.procs {
		p.stop()
	}
	for _, ns := range []string{nsClient, nsRouter, nsModem, nsServer} {
		t.sh.run("", "ip", "netns", "del", ns)
	}
}

// qdiscs is the router's qdisc state (without counters), to compare the
// state before start with the state after stop.
func (t *topo) qdiscs() (string, error) {
	out, err := t.sh.run(nsRouter, "tc", "qdisc", "show")
	return out, err
}

// tcStats is the `tc -s` view of the router and the modem for the logs.
func (t *topo) tcStats() string {
	var b strings.Builder
	for _, ns := range []string{nsRouter, nsModem} {
		out, _ := t.sh.run(ns, "tc", "-s", "qdisc", "show")
		fmt.Fprintf(&b, "== %s: tc -s qdisc show\n%s", ns, out)
		out, _ = t.sh.run(ns, "ip", "-s", "link", "show")
		fmt.Fprintf(&b, "== %s: ip -s link show\n%s", ns, out)
	}
	return b.String()
}
