package openwrt

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// pkgManager is the router's package manager: opkg up to OpenWrt 24.10,
// apk (apk-tools 3) from 25.12.
type pkgManager struct {
	name            string
	rootOpt         string   // how it is told to act on another root
	update, install []string // its arguments
	has             func(root, pkg string) bool
}

func detect(root string) *pkgManager {
	switch {
	case exists(root, "usr/bin/apk"), exists(root, "sbin/apk"):
		return &pkgManager{name: "apk", rootOpt: "--root", update: []string{"update"}, install: []string{"add"}, has: apkHas}
	case exists(root, "bin/opkg"), exists(root, "usr/bin/opkg"):
		return &pkgManager{name: "opkg", rootOpt: "--offline-root", update: []string{"update"}, install: []string{"install"}, has: opkgHas}
	}
	return nil
}

func exists(root, p string) bool {
	_, err := os.Stat(filepath.Join(root, p))
	return err == nil
}

func opkgHas(root, pkg string) bool { return exists(root, "usr/lib/opkg/info/"+pkg+".control") }

// apkHas reads apk's database, whose "P:" lines name installed packages.
func apkHas(root, pkg string) bool {
	f, err := os.Open(filepath.Join(root, "lib/apk/db/installed"))
	if err != nil {
		return false
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if sc.Text() == "P:"+pkg {
			return true
		}
	}
	return false
}

// Needed lists the packages sqmkit needs that root lacks: a tc and an ip
// with batch mode (busybox's ip has none), the IFB and the core qdiscs,
// CAKE except on a Qualcomm NSS router (whose shaper is nssfq_codel), and
// the CA bundle a test against a public server needs.
func Needed(root string) []string {
	pm := detect(root)
	var out []string
	if !exists(root, "usr/sbin/tc") && !exists(root, "sbin/tc") {
		out = append(out, "tc-tiny")
	}
	if ip, err := filepath.EvalSymlinks(filepath.Join(root, "sbin/ip")); err != nil || strings.HasSuffix(ip, "busybox") {
		out = append(out, "ip-tiny")
	}
	kmods := []string{"kmod-sched-core", "kmod-ifb"}
	if !exists(root, "sys/module/qca_nss_qdisc") {
		kmods = append(kmods, "kmod-sched-cake")
	}
	for _, k := range kmods {
		if pm == nil || !pm.has(root, k) {
			out = append(out, k)
		}
	}
	// the CAs a test against a public server checks its certificate with
	if !exists(root, "etc/ssl/certs/ca-certificates.crt") && (pm == nil || !pm.has(root, "ca-bundle")) {
		out = append(out, "ca-bundle")
	}
	return out
}

func (o *Options) deps(root string, pm *pkgManager) error {
	need := Needed(root)
	if len(need) == 0 {
		return nil
	}
	if pm == nil {
		return fmt.Errorf("sqmkit needs %s, and this system has neither opkg nor apk to install them (install them, then run sqmkit install --no-deps)", strings.Join(need, ", "))
	}
	fmt.Fprintf(o.Out, "installing what sqmkit needs with %s: %s\n", pm.name, strings.Join(need, " "))
	var onRoot []string // a scratch root: the manager's option for it
	if !live(root) {
		onRoot = []string{pm.rootOpt, root}
	}
	if err := o.run(nil, pm.name, append(onRoot, pm.update...)...); err != nil {
		return fmt.Errorf("%s %s: %w", pm.name, strings.Join(pm.update, " "), err)
	}
	if err := o.run(nil, pm.name, append(append(onRoot, pm.install...), need...)...); err != nil {
		return fmt.Errorf("%s %s %s: %w (install them by hand, then run sqmkit install --no-deps)", pm.name, strings.Join(pm.install, " "), strings.Join(need, " "), err)
	}
	return nil
}

// SQMScriptsApplies says whether sqm-scripts' service is installed and
// enabled under root: then it applies every queue of /etc/config/sqm
// (sqmkit's own through /usr/lib/sqm/sqmkit-*.qos) and sqmkit's service
// only runs autorate (functions.sh's sqmkit_defers says the same to the
// shell files).
func SQMScriptsApplies(root string) bool {
	if st, err := os.Stat(filepath.Join(root, "etc/init.d/sqm")); err != nil || st.Mode()&0o111 == 0 {
		return false
	}
	links, _ := filepath.Glob(filepath.Join(root, "etc/rc.d/S[0-9][0-9]sqm"))
	return len(links) > 0
}
