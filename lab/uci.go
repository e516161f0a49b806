package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

// uciBackend is how LuCI's SQM page names each backend (qdisc, script).
var uciBackend = map[string][2]string{
	"fq_codel": {"fq_codel", "simple.qos"},
	"cake":     {"cake", "piece_of_cake.qos"},
	"cake_mq":  {"cake", "piece_of_cake.qos"},
	"nss":      {"fq_codel", "nss-zk.qos"},
}

// routerUCI renders the router's /etc/config/sqm and /etc/config/network
// the way LuCI writes them. The overhead is left out on purpose: sqmkit
// must detect it from the network config and the kernel.
func routerUCI(p *profile.Profile, wanDev, backend, script string, down, up int) (sqm, network string) {
	// NSS has no size tables, so an NSS user on ATM can only pick ethernet
	// (sqmkit refuses atm there); the profile's limitation records the cost.
	ll := "ethernet"
	if p.LinkLayer == "atm" && backend != "nss" {
		ll = "atm"
	}
	b := uciBackend[backend]
	if script != "" {
		b[1] = script // a .qos script of the OpenWrt package
	}
	sqm = fmt.Sprintf(`
config queue 'wan'
	option enabled '1'
	option interface '%s'
	option download '%d'
	option upload '%d'
	option qdisc '%s'
	option script '%s'
	option linklayer '%s'
	option qdisc_advanced '0'
	option debug_logging '0'
	option verbosity '5'
`, wanDev, down, up, b[0], b[1], ll)
	if backend == "cake_mq" {
		sqm += "\toption use_mq '1'\n"
	}
	lower := "wan"
	if p.Encap.VLAN > 0 {
		lower = fmt.Sprintf("wan.%d", p.Encap.VLAN)
	}
	wan := fmt.Sprintf("\toption proto 'static'\n\toption ipaddr '10.2.0.1'\n\toption netmask '255.255.255.0'\n\toption gateway '10.2.0.2'\n")
	if p.Encap.PPPoE {
		wan = "\toption proto 'pppoe'\n\toption username 'lab'\n\toption password 'lab'\n\toption ipv6 '0'\n"
	}
	network = fmt.Sprintf(`
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config interface 'lan'
	option device 'lan'
	option proto 'static'
	option ipaddr '10.1.0.1'
	option netmask '255.255.255.0'

config interface 'wan'
	option device '%s'
%s`, lower, wan)
	if p.Encap.VLAN > 0 {
		network += fmt.Sprintf("\nconfig device\n\toption type '8021q'\n\toption ifname 'wan'\n\toption vid '%d'\n\toption name '%s'\n", p.Encap.VLAN, lower)
	}
	return sqm, network
}

// writeRouterRoot makes the router's --root: its UCI files on the guest's
// tmpfs, and the kernel's live /sys and /proc behind symlinks, seen from
// the router's namespace when sqmkit runs there.
func writeRouterRoot(root string, p *profile.Profile, wanDev, backend, script string, down, up int) error {
	sqm, network := routerUCI(p, wanDev, backend, script, down, up)
	cfg := filepath.Join(root, "etc/config")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{"sqm": sqm, "network": network} {
		if err := os.WriteFile(filepath.Join(cfg, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{"sys", "proc"} {
		os.Remove(filepath.Join(root, d))
		if err := os.Symlink("/"+d, filepath.Join(root, d)); err != nil {
			return err
		}
	}
	return nil
}
