package plan

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

// telekom is the spec §4 worked example: PPPoE over VLAN 7, nss-zk.qos,
// advanced options `interval 50ms quantum 304`, target 4ms.
func telekom() (config.Queue, linkinfo.Facts) {
	q := config.Queue{
		Section: "wan", Enabled: true, Interface: "wan",
		Download: 285000, Upload: 142500,
		Backend: config.NSS, Script: "nss-zk.qos",
		IngressECN: true,
		ITarget:    "4ms", ETarget: "4ms",
		IQdiscOpts: "interval 50ms quantum 304", EQdiscOpts: "interval 50ms quantum 304",
	}
	f := linkinfo.Facts{Device: "wan", Exists: true, OperUp: true, MTU: 1500,
		NetworkSection: "wan", Proto: "pppoe", LowerDevice: "wan.7"}
	return q, f
}

func mustBuild(t *testing.T, q config.Queue, f linkinfo.Facts) *Plan {
	t.Helper()
	p, err := Build(q, f)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func line(argv []string) string { return strings.Join(argv, " ") }

func TestTelekomWorkedExample(t *testing.T) {
	q, f := telekom()
	// The fixture's egress was shaped at 145000 kbit and its ingress at
	// 295000 kbit; limit 354p / 720p at the 30 ms window.
	q.Upload, q.Download = 145000, 295000
	p := mustBuild(t, q, f)
	if len(p.Dirs) != 2 {
		t.Fatalf("got %d dirs, want 2", len(p.Dirs))
	}
	for _, tc := range []struct {
		dir   Direction
		dev   string
		limit int
		ecn   string
	}{{Egress, "wan", 354, ""}, {Ingress, "ifb@wan", 720, " ecn"}} {
		d := p.Dirs[tc.dir]
		if d.Direction != tc.dir || d.Device != tc.dev {
			t.Errorf("%v: dir %v on %s", tc.dir, d.Direction, d.Device)
		}
		if d.Overhead != 36 || d.MTU != 1536 || d.Limit != tc.limit {
			t.Errorf("%v: overhead %d mtu %d limit %d, want 36 1536 %d", tc.dir, d.Overhead, d.MTU, d.Limit, tc.limit)
		}
		var qdiscs []string
		for _, n := range d.Tree {
			if n.Dev == tc.dev && n.Type == "qdisc" {
				qdiscs = append(qdiscs, n.Kind)
			}
		}
		if !slices.Equal(qdiscs, []string{"nsstbl", "nssfq_codel"}) {
			t.Errorf("%v: qdiscs on %s = %v, want nsstbl nssfq_codel", tc.dir, tc.dev, qdiscs)
		}
		wantLeaf := "qdisc add dev " + tc.dev + " parent 1: handle 10: nssfq_codel limit " +
			strconv.Itoa(tc.limit) + " target 4ms interval 50ms flows 1024 quantum 304" + tc.ecn + " set_default accel_mode 0"
		if got := line(d.TC[1]); got != wantLeaf {
			t.Errorf("%v leaf:\n got %s\nwant %s", tc.dir, got, wantLeaf)
		}
		if !strings.HasSuffix(line(d.TC[0]), "mtu 1536 accel_mode 0") {
			t.Errorf("%v root: %s", tc.dir, line(d.TC[0]))
		}
		if d.Target != 4*time.Millisecond || d.Interval != 50*time.Millisecond || d.FQQuantum != 304 {
			t.Errorf("%v: target %v interval %v quantum %d", tc.dir, d.Target, d.Interval, d.FQQuantum)
		}
	}
	// The fixture's egress root: nsstbl 145Mbit mtu 1536b, burst 12 MTUs.
	if got, want := line(p.Dirs[0].TC[0]), "qdisc add dev wan root handle 1: nsstbl rate 145000kbit burst 18432 mtu 1536 accel_mode 0"; got != want {
		t.Errorf("egress root:\n got %s\nwant %s", got, want)
	}
	if !slices.Contains(p.Notes, "proto=pppoe device=wan.7 -> overhead 36 bytes (ethernet 18 + nss 4 + pppoe 10 + vlan 4)") {
		t.Errorf("overhead note missing: %q", p.Notes)
	}
}
