package linkinfo

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Stack is dev and every device under it, top first, as root's files say:
// the device netifd's section puts a tunnel or PPP device on (pppoe-wan on
// wan.7), a VLAN's device, the kernel's lower_* links, and, where /sys and
// /proc say nothing (a router's files copied without them), netifd's
// VLAN name base.VID on base. A packet sent out of dev passes each of
// them, so each one's qdisc shapes it (TestStack).
func Stack(root, dev string) []string {
	var out []string
	todo := []string{dev}
	for len(todo) > 0 && len(out) < 16 {
		d := todo[0]
		todo = todo[1:]
		if slices.Contains(out, d) {
			continue
		}
		out = append(out, d)
		f, err := Read(root, d)
		if err != nil {
			continue
		}
		tunnel := slices.ContainsFunc(tunnelPrefixes, func(p string) bool { return strings.HasPrefix(d, p) })
		if tunnel && f.LowerDevice != "" && !strings.HasPrefix(f.LowerDevice, "@") {
			todo = append(todo, f.LowerDevice)
		}
		todo = append(todo, f.Lower...)
		if len(f.Lower) == 0 {
			if base, vid, ok := strings.Cut(d, "."); ok && base != "" {
				if _, err := strconv.Atoi(vid); err == nil {
					if _, err := os.Stat(filepath.Join(cmp.Or(root, "/"), "sys/class/net", base)); err == nil {
						todo = append(todo, base)
					}
				}
			}
		}
	}
	return out
}
