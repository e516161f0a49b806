package linkinfo

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sqmkit/sqmkit/internal/sizelimit"
	"github.com/sqmkit/sqmkit/internal/uci"
)

// defaultMTU is assumed when /sys has no MTU for the device (it is absent,
// or the files are a router's config copied without /sys).
const defaultMTU = 1500

// The MTUs a device can have: IPv4's minimum, and the largest any Linux
// device reports (loopback's 65536). Anything else in /sys is a broken or
// forged file, reported as such rather than planned with.
const (
	MinMTU = 68
	MaxMTU = 65536
)

// arphrdKinds maps /sys/class/net/<dev>/type (ARPHRD_*) to Kind for devices
// whose uevent names no DEVTYPE.
var arphrdKinds = map[int]string{
	1:     "ether",
	512:   "ppp",
	768:   "ipip",
	769:   "ip6tnl",
	772:   "loopback",
	776:   "sit",
	778:   "gre",
	65534: "none",
}

// tunnelPrefixes are the device names netifd gives the device of an
// interface section whose proto creates one: proto pppoe on section wan
// brings up pppoe-wan.
var tunnelPrefixes = []string{"pppoe-", "pppoa-", "dslite-", "map-", "6in4-", "6rd-", "6to4-", "gre4-", "gre6-", "l2tp-", "3g-", "wwan-"}

// Read gathers the facts about device from files under root: /sys/class/net,
// /proc/net/vlan and /etc/config/network. A device that does not exist is
// not an error (Exists is false), so a router's files can be planned
// elsewhere; a file that exists but cannot be read or parsed is.
func Read(root, device string) (Facts, error) {
	if root == "" {
		root = "/"
	}
	f := Facts{Device: device, MTU: defaultMTU}
	if device == "" || strings.ContainsAny(device, "/") || device == "." || device == ".." {
		return f, fmt.Errorf("device %q is not a valid Linux device name", device)
	}
	r := reader{root: root}
	if err := r.sys(&f); err != nil {
		return f, err
	}
	if err := r.network(&f); err != nil {
		return f, err
	}
	if f.NetworkSection == "" {
		kernelProto(&f)
	}
	return f, nil
}

type reader struct{ root string }

// path is where the file at p (as on the device) is here, for messages: a
// router's files copied under --root are named as the user has them.
func (r reader) path(p string) string { return filepath.Join(r.root, filepath.FromSlash(p)) }

// file reads the file at the absolute path p (as on the device) under root.
// A missing file returns ok=false and no error.
func (r reader) file(p string) (data string, ok bool, err error) {
	limit := int64(sizelimit.Sys)
	if strings.HasPrefix(p, "/etc/") {
		limit = sizelimit.UCI
	}
	b, err := sizelimit.ReadFile(r.path(p), limit, "file under --root")
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err // names the path under root already
	}
	return string(b), true, nil
}

func (r reader) sys(f *Facts) error {
	dir := path.Join("/sys/class/net", f.Device)
	if st, err := os.Stat(filepath.Join(r.root, filepath.FromSlash(dir))); err == nil && st.IsDir() {
		f.Exists = true
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("%s: no such device here; planning from the config alone", dir))
	}

	mtu, ok, err := r.file(dir + "/mtu")
	if err != nil {
		return err
	}
	if ok {
		n, err := strconv.Atoi(strings.TrimSpace(mtu))
		if err != nil || n < MinMTU || n > MaxMTU {
			return fmt.Errorf("%s: %q is not an MTU (%d..%d)", r.path(dir+"/mtu"), strings.TrimSpace(mtu), MinMTU, MaxMTU)
		}
		f.MTU = n
		f.Notes = append(f.Notes, fmt.Sprintf("%s/mtu=%d", dir, n))
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("%s/mtu absent: assuming mtu %d", dir, defaultMTU))
	}

	f.TXQueues, f.RXQueues = r.queues(dir, "tx-"), r.queues(dir, "rx-")

	// The kernel refuses to report speed for links that are down or
	// virtual (EINVAL, or -1): then it is simply unknown.
	if speed, ok, _ := r.file(dir + "/speed"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(speed)); err == nil && n > 0 {
			f.SpeedMbit = n
			f.Notes = append(f.Notes, fmt.Sprintf("%s/speed=%d", dir, n))
		}
	}

	state, ok, err := r.file(dir + "/operstate")
	if err != nil {
		return err
	}
	if ok {
		s := strings.TrimSpace(state)
		f.OperUp = s == "up" || s == "unknown"
		f.Notes = append(f.Notes, fmt.Sprintf("%s/operstate=%s", dir, s))
	}

	typ, ok, err := r.file(dir + "/type")
	if err != nil {
		return err
	}
	if ok {
		n, err := strconv.Atoi(strings.TrimSpace(typ))
		if err != nil {
			return fmt.Errorf("%s: %q is not an ARPHRD number", r.path(dir+"/type"), strings.TrimSpace(typ))
		}
		f.Kind = arphrdKinds[n]
		f.Notes = append(f.Notes, fmt.Sprintf("%s/type=%d (%s)", dir, n, cmp.Or(f.Kind, "-")))
	}

	uevent, _, err := r.file(dir + "/uevent")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(uevent, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "DEVTYPE="); ok && v != "" {
			f.Kind = v
			f.Notes = append(f.Notes, fmt.Sprintf("%s/uevent: DEVTYPE=%s", dir, v))
		}
	}

	vlan, ok, err := r.file(path.Join("/proc/net/vlan", f.Device))
	if err != nil {
		return err
	}
	if ok {
		f.Kind = "vlan"
		note := fmt.Sprintf("/proc/net/vlan/%s: 802.1Q VLAN", f.Device)
		if lower := vlanLower(vlan); lower != "" {
			note += " on " + lower
			f.Lower = append(f.Lower, lower)
		}
		f.Notes = append(f.Notes, note)
	}
	entries, _ := os.ReadDir(r.path(dir))
	for _, e := range entries {
		if l, ok := strings.CutPrefix(e.Name(), "lower_"); ok && !slices.Contains(f.Lower, l) {
			f.Lower = append(f.Lower, l)
		}
	}
	return nil
}

// queues counts dir's queue directories whose names start with prefix.
func (r reader) queues(dir, prefix string) int {
	es, _ := os.ReadDir(r.path(dir + "/queues"))
	n := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// vlanLower returns the "Device:" line of a /proc/net/vlan/<dev> file.
func vlanLower(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Device:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// network finds the /etc/config/network interface section that owns the
// device: (a) the section a tunnel or PPP device is named after
// (pppoe-wan -> wan), (b) a section whose device (or pre-21.02 ifname) is
// the device, (c) a section named like the device.
func (r reader) network(f *Facts) error {
	const p = "/etc/config/network"
	data, ok, err := r.file(p)
	if err != nil || !ok {
		return err
	}
	file, err := uci.Parse(r.path(p), []byte(data))
	if err != nil {
		return err
	}
	var ifaces []*uci.Section
	for _, s := range file.Sections {
		if s.Type == "interface" {
			ifaces = append(ifaces, s)
		}
	}
	s, why := match(ifaces, f.Device)
	if s == nil {
		f.Notes = append(f.Notes, fmt.Sprintf("%s: no interface section uses %s", p, f.Device))
		return nil
	}
	f.NetworkSection = s.Name
	f.Proto, _ = s.Get("proto")
	f.LowerDevice = lowerDevice(s)
	f.Notes = append(f.Notes, fmt.Sprintf("network.%s: proto=%s device=%s (%s)", s.Name, cmp.Or(f.Proto, "-"), cmp.Or(f.LowerDevice, "-"), why))
	return nil
}

func match(ifaces []*uci.Section, dev string) (*uci.Section, string) {
	for _, pre := range tunnelPrefixes {
		if name, ok := strings.CutPrefix(dev, pre); ok {
			for _, s := range ifaces {
				if s.Name == name {
					return s, fmt.Sprintf("%s is the %s device of section %s", dev, strings.TrimSuffix(pre, "-"), name)
				}
			}
		}
	}
	var uses []*uci.Section
	for _, s := range ifaces {
		for _, opt := range []string{"device", "ifname"} {
			if v, ok := s.Get(opt); ok && fieldsContain(v, dev) {
				uses = append(uses, s)
				break
			}
		}
	}
	// wan and wan6 often share a device; the section named like the
	// device, else the first in the file, is the one that brings it up.
	for _, s := range uses {
		if s.Name == dev {
			return s, "its device is " + dev
		}
	}
	if len(uses) > 0 {
		return uses[0], "its device is " + dev
	}
	for _, s := range ifaces {
		if s.Name == dev {
			return s, "section named like the device"
		}
	}
	return nil, ""
}

func fieldsContain(v, dev string) bool {
	for _, w := range strings.Fields(v) {
		if w == dev {
			return true
		}
	}
	return false
}

// lowerDevice is the section's device, or its first ifname for configs
// older than OpenWrt 21.02. "@wan" (an alias of another interface) is not a
// device.
func lowerDevice(s *uci.Section) string {
	for _, opt := range []string{"device", "ifname"} {
		if v, ok := s.Get(opt); ok {
			if w := strings.Fields(v); len(w) > 0 && !strings.HasPrefix(w[0], "@") {
				return w[0]
			}
		}
	}
	return ""
}

// kernelProto fills Proto (and LowerDevice for VLANs) from the kernel's
// device kind when no network section describes the device, as on a plain
// Linux box. The names match what the planner's overhead table knows.
func kernelProto(f *Facts) {
	switch f.Kind {
	case "ppp":
		// The kernel cannot tell PPPoE from PPPoA or a serial link;
		// PPPoE is by far the common case on a WAN.
		f.Proto = "pppoe"
		f.Notes = append(f.Notes, "kernel: ppp device, assumed PPPoE (set --overhead for PPPoA)")
	case "ip6tnl":
		f.Proto = "dslite"
		f.Notes = append(f.Notes, "kernel: ip6tnl tunnel (IPv4 in IPv6, 40-byte outer header) -> proto dslite")
	case "ipip", "sit":
		f.Proto = "ipip"
		f.Notes = append(f.Notes, fmt.Sprintf("kernel: %s tunnel (20-byte outer IPv4 header) -> proto ipip", f.Kind))
	case "wireguard":
		f.Proto = "wireguard"
		f.Notes = append(f.Notes, "kernel: wireguard device -> proto wireguard")
	case "vlan":
		f.LowerDevice = f.Device
		f.Notes = append(f.Notes, fmt.Sprintf("kernel: %s is a VLAN device: counts the 802.1Q tag", f.Device))
	}
}
