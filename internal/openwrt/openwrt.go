// Package openwrt holds sqmkit's OpenWrt files (the init script, the
// hotplug handler, the .qos scripts sqm-scripts and LuCI list, the first
// boot defaults) and installs them without a buildroot: the static binary
// carries them, so `sqmkit install` on a router puts them where the feed
// package would, and `sqmkit uninstall` takes them away again
// (docs/design.md, "Installing on a router"). The feed Makefile installs
// the same files from files/; TestFeedInstallsTheseFiles keeps the two in
// step.
package openwrt

import (
	"embed"
	"io/fs"
	"path"
)

//go:embed files
var embedded embed.FS

// File is one file of the package: its name in files/ and where it goes
// under the root.
type File struct {
	Src  string
	Dst  string
	Mode fs.FileMode
}

// Files are the package's files, as the feed Makefile installs them.
var Files = []File{
	{"sqmkit.init", "etc/init.d/sqmkit", 0o755},
	{"sqmkit.hotplug", "etc/hotplug.d/iface/12-sqmkit", 0o644},
	{"sqmkit.uci-defaults", "etc/uci-defaults/90-sqmkit", 0o644},
	{"functions.sh", "usr/lib/sqmkit/functions.sh", 0o644},
	{"qos.sh", "usr/lib/sqmkit/qos.sh", 0o644},
	{"sqmkit-nss.qos", "usr/lib/sqm/sqmkit-nss.qos", 0o644},
	{"sqmkit-nss.qos.help", "usr/lib/sqm/sqmkit-nss.qos.help", 0o644},
	{"sqmkit-cake.qos", "usr/lib/sqm/sqmkit-cake.qos", 0o644},
	{"sqmkit-cake.qos.help", "usr/lib/sqm/sqmkit-cake.qos.help", 0o644},
	{"sqmkit-fq_codel.qos", "usr/lib/sqm/sqmkit-fq_codel.qos", 0o644},
	{"sqmkit-fq_codel.qos.help", "usr/lib/sqm/sqmkit-fq_codel.qos.help", 0o644},
}

// LuCIFiles are luci-app-sqmkit's (the feed's second package): the views,
// the chart they draw with and how they show an error, the menu, the ACL
// and the rpcd plugin, which runs sqmkit rpcd. Install puts them where LuCI is.
var LuCIFiles = []File{
	{"luci/htdocs/luci-static/resources/view/sqmkit/status.js", "www/luci-static/resources/view/sqmkit/status.js", 0o644},
	{"luci/htdocs/luci-static/resources/view/sqmkit/test.js", "www/luci-static/resources/view/sqmkit/test.js", 0o644},
	{"luci/htdocs/luci-static/resources/view/sqmkit/tune.js", "www/luci-static/resources/view/sqmkit/tune.js", 0o644},
	{"luci/htdocs/luci-static/resources/view/sqmkit/autorate.js", "www/luci-static/resources/view/sqmkit/autorate.js", 0o644},
	{"luci/htdocs/luci-static/resources/sqmkit/chart.js", "www/luci-static/resources/sqmkit/chart.js", 0o644},
	{"luci/htdocs/luci-static/resources/sqmkit/notify.js", "www/luci-static/resources/sqmkit/notify.js", 0o644},
	{"luci/root/usr/share/luci/menu.d/luci-app-sqmkit.json", "usr/share/luci/menu.d/luci-app-sqmkit.json", 0o644},
	{"luci/root/usr/share/rpcd/acl.d/luci-app-sqmkit.json", "usr/share/rpcd/acl.d/luci-app-sqmkit.json", 0o644},
	{"luci/root/usr/libexec/rpcd/sqmkit", "usr/libexec/rpcd/sqmkit", 0o755},
}

// Read returns the text of one of Files.
func Read(f File) ([]byte, error) { return embedded.ReadFile(path.Join("files", f.Src)) }
