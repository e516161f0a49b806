package linkinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// readCases are the /sys and /etc/config/network trees under testdata and
// what Read must make of them; Device and Notes are not compared field by field.
var readCases = []struct {
	name, root, dev string
	want            Facts
	notes           []string
}{
	{
		name: "plain ethernet, ifname config", root: "ethernet", dev: "eth1",
		want:  Facts{Exists: true, OperUp: true, MTU: 1500, SpeedMbit: 1000, Kind: "ether", NetworkSection: "wan", Proto: "dhcp", LowerDevice: "eth1"},
		notes: []string{"/sys/class/net/eth1/mtu=1500", "network.wan: proto=dhcp device=eth1"},
	},
	{
		name: "worked example: sqm on wan, section wan is pppoe over wan.7", root: "pppoe-vlan", dev: "wan",
		want:  Facts{Exists: true, OperUp: true, MTU: 1500, SpeedMbit: 1000, Kind: "dsa", NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"},
		notes: []string{"network.wan: proto=pppoe device=wan.7 (section named like the device)"},
	},
	{
		name: "pppoe device of section wan", root: "pppoe-vlan", dev: "pppoe-wan",
		want:  Facts{Exists: true, OperUp: true, MTU: 1492, Kind: "ppp", NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"},
		notes: []string{"/sys/class/net/pppoe-wan/type=512 (ppp)", "uevent: DEVTYPE=ppp", "pppoe-wan is the pppoe device of section wan"},
	},
	{
		name: "the vlan device itself", root: "pppoe-vlan", dev: "wan.7",
		want: Facts{Exists: true, OperUp: true, MTU: 1500, Kind: "vlan", NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"},
	},
	{
		name: "dslite", root: "dslite", dev: "dslite-wan",
		want:  Facts{Exists: true, OperUp: true, MTU: 1452, Kind: "ip6tnl", NetworkSection: "wan", Proto: "dslite"},
		notes: []string{"network.wan: proto=dslite device=-"},
	},
	{
		name: "wan6 shares eth1 with nobody named eth1: first section wins", root: "dslite", dev: "eth1",
		want: Facts{MTU: 1500, NetworkSection: "wan6", Proto: "dhcpv6", LowerDevice: "eth1"},
	},
	{
		name: "map-e", root: "map-e", dev: "map-wan",
		want: Facts{Exists: true, OperUp: true, MTU: 1460, Kind: "ip6tnl", NetworkSection: "wan", Proto: "map"},
	},
	{
		name: "wireguard", root: "wireguard", dev: "wg0",
		want:  Facts{Exists: true, OperUp: true, MTU: 1420, Kind: "wireguard", NetworkSection: "wg0", Proto: "wireguard"},
		notes: []string{"type=65534 (none)", "DEVTYPE=wireguard"},
	},
	{
		name: "four TX and RX queues", root: "multiqueue", dev: "eth0",
		want: Facts{Exists: true, OperUp: true, MTU: 1500, SpeedMbit: 1000, Kind: "ether", TXQueues: 4, RXQueues: 4},
	},
	{
		name: "plain linux ppp0: assumed pppoe", root: "linux-ppp", dev: "ppp0",
		want:  Facts{Exists: true, OperUp: true, MTU: 1492, Kind: "ppp", Proto: "pppoe"},
		notes: []string{"assumed PPPoE"},
	},
	{
		name: "plain linux ethernet", root: "linux-ppp", dev: "eth0",
		want: Facts{Exists: true, OperUp: true, MTU: 1500, SpeedMbit: 1000, Kind: "ether"},
	},
	{
		name: "plain linux vlan eth0.7", root: "linux-vlan", dev: "eth0.7",
		want:  Facts{Exists: true, OperUp: true, MTU: 1500, Kind: "vlan", Lower: []string{"eth0"}, LowerDevice: "eth0.7"},
		notes: []string{"/proc/net/vlan/eth0.7: 802.1Q VLAN on eth0", "counts the 802.1Q tag"},
	},
	{
		name: "speed -1 (link down) is unknown", root: "linux-vlan", dev: "eth0",
		want: Facts{Exists: true, OperUp: true, MTU: 1500, Kind: "ether"},
	},
	{
		name: "router config without /sys", root: "missing", dev: "pppoe-wan",
		want:  Facts{MTU: 1500, NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"},
		notes: []string{"/sys/class/net/pppoe-wan: no such device", "mtu absent: assuming mtu 1500"},
	},
	{
		name: "unknown device", root: "missing", dev: "eth9",
		want:  Facts{MTU: 1500},
		notes: []string{"no interface section uses eth9"},
	},
	{
		name: "wan6 with @wan device is not a lower device", root: "missing", dev: "wan6",
		want: Facts{MTU: 1500, NetworkSection: "wan6", Proto: "dhcpv6"},
	},
}

func TestRead(t *testing.T) {
	for _, tt := range readCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(filepath.Join("testdata", tt.root), tt.dev)
			if err != nil {
				t.Fatal(err)
			}
			notes := got.Notes
			got.Notes, got.Device = nil, ""
			if !equal(got, tt.want) {
				t.Errorf("Read(%s) =\n %+v\nwant\n %+v", tt.dev, got, tt.want)
			}
			joined := strings.Join(notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(joined, n) {
					t.Errorf("notes lack %q:\n%s", n, joined)
				}
			}
			if len(notes) == 0 {
				t.Error("no notes: every fact must say where it came from")
			}
		})
	}
}

// equal compares every fact but the notes and the device name, so a new
// field is compared without touching this.
func equal(a, b Facts) bool {
	a.Notes, b.Notes, a.Device, b.Device = nil, nil, "", ""
	return reflect.DeepEqual(a, b)
}

func TestReadErrors(t *testing.T) {
	unreadable := t.TempDir()
	dir := filepath.Join(unreadable, "sys/class/net/eth0")
	if err := os.MkdirAll(filepath.Join(dir, "mtu"), 0o755); err != nil { // a directory where a file belongs
		t.Fatal(err)
	}
	huge := t.TempDir()
	if err := os.MkdirAll(filepath.Join(huge, "sys/class/net/wan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(huge, "sys/class/net/wan/mtu"), []byte("9223372036854775807\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// every message names the file as it is here, under the root
	tests := []struct {
		root, dev, want string
	}{
		{"testdata/bad-mtu", "eth0", `testdata/bad-mtu/sys/class/net/eth0/mtu: "fifteen hundred" is not an MTU`},
		{"testdata/bad-type", "eth0", `testdata/bad-type/sys/class/net/eth0/type: "ether" is not an ARPHRD number`},
		{"testdata/bad-network", "wan", "testdata/bad-network/etc/config/network:2: unterminated ' quote"},
		{unreadable, "eth0", "read " + filepath.Join(unreadable, "sys/class/net/eth0/mtu")},
		{huge, "wan", filepath.Join(huge, "sys/class/net/wan/mtu") + `: "9223372036854775807" is not an MTU (68..65536)`},
		{"testdata/missing", "../../etc", "not a valid Linux device name"},
		{"testdata/missing", "", "not a valid Linux device name"},
	}
	for _, tt := range tests {
		_, err := Read(tt.root, tt.dev)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Read(%s, %q) error = %v, want it to contain %q", tt.root, tt.dev, err, tt.want)
		}
	}
}

// TestStack: the devices a packet sent out of a device passes, top first.
func TestStack(t *testing.T) {
	for _, c := range []struct {
		root, dev string
		want      []string
	}{
		{"testdata/pppoe-vlan", "pppoe-wan", []string{"pppoe-wan", "wan.7", "wan"}},
		{"testdata/pppoe-vlan", "wan", []string{"wan"}},
		{"testdata/linux-vlan", "eth0.7", []string{"eth0.7", "eth0"}},
		{"testdata/ethernet", "eth1", []string{"eth1"}},
		{"testdata/missing", "nope", []string{"nope"}},
	} {
		if got := Stack(c.root, c.dev); !slices.Equal(got, c.want) {
			t.Errorf("Stack(%s, %s) = %q, want %q", c.root, c.dev, got, c.want)
		}
	}
}
