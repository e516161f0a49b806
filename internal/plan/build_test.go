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

// telekom is the worked example of docs/design.md: PPPoE over VLAN 7, nss-zk.qos,
// advanced options `interval 50ms quantum 304`, target 4ms.
func telekom() (config.Queue, linkinfo.Facts) {
	q := config.Queue{
		Section: "wan", Enabled: true, Interface: "wan",
		Download: 285000, Upload: 142500,
		Backend: config.NSS, Script: "nss-zk.qos",
		IngressECN: true,
		ITarget:    "4ms", ETarget: "4ms",
		IQdiscOpts: "interval 50ms quantum 304", EQdiscOpts: "interval 50ms quantum 304",
		Notes: []string{"script=nss-zk.qos -> backend nss"},
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

// dirOf is p's plan of direction d; the test fails when p does not shape it.
func dirOf(t *testing.T, p *Plan, d config.Direction) *Dir {
	t.Helper()
	for _, x := range p.Dirs {
		if x.Direction == d {
			return x
		}
	}
	t.Fatalf("the plan does not shape the %s", d)
	return nil
}

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
		dir   config.Direction
		dev   string
		limit int
		ecn   string
	}{{config.Upload, "wan", 354, ""}, {config.Download, "ifb@wan", 720, " ecn"}} {
		d := dirOf(t, p, tc.dir)
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

// conn is one connection type of docs/design.md, "Per-packet overhead", with its expected overhead per
// backend (nss adds its 4 bytes of internal framing).
var conns = []struct {
	name        string
	f           linkinfo.Facts
	iface       string
	overhead    int // configured, 0 = auto
	cpu, nssOH  int
	noteContain string
}{
	{"ethernet", linkinfo.Facts{MTU: 1500, Proto: "dhcp", LowerDevice: "eth0"}, "wan", 0, 18, 22, "proto=dhcp device=eth0 -> overhead"},
	{"pppoe", linkinfo.Facts{MTU: 1500, Proto: "pppoe", LowerDevice: "eth0"}, "wan", 0, 28, 32, "pppoe 10"},
	{"pppoe+vlan", linkinfo.Facts{MTU: 1500, Proto: "pppoe", LowerDevice: "wan.7"}, "wan", 0, 32, 36, "vlan 4"},
	{"dslite", linkinfo.Facts{MTU: 1500, Proto: "dslite", LowerDevice: "eth0"}, "wan", 0, 58, 62, "dslite 40"},
	{"map", linkinfo.Facts{MTU: 1500, Proto: "map", LowerDevice: "eth0"}, "wan", 0, 38, 42, "map 20"},
	{"vlan only", linkinfo.Facts{MTU: 1500, Proto: "static", LowerDevice: "eth1.100"}, "wan", 0, 22, 26, "vlan 4"},
	{"kernel vlan", linkinfo.Facts{MTU: 1500, Kind: "vlan"}, "wan7", 0, 22, 26, "proto=- device=wan7 -> overhead"},
	{"kernel dotted name", linkinfo.Facts{MTU: 1500}, "eth0.7", 0, 22, 26, "device=eth0.7"},
	{"kernel ppp", linkinfo.Facts{MTU: 1492, Kind: "ppp", Proto: "pppoe"}, "pppoe-wan", 0, 28, 32, "pppoe 10"},
	{"kernel ip6tnl", linkinfo.Facts{MTU: 1460, Kind: "ip6tnl", Proto: "dslite"}, "ds-wan", 0, 58, 62, "dslite 40"},
	{"kernel ipip", linkinfo.Facts{MTU: 1480, Kind: "sit", Proto: "ipip"}, "tun0", 0, 38, 42, "ipv4 tunnel 20"},
	{"configured", linkinfo.Facts{MTU: 1500, Proto: "pppoe", LowerDevice: "wan.7"}, "wan", 44, 44, 44, "overhead 44 bytes (configured)"},
	{"no mtu known", linkinfo.Facts{Proto: "dhcp"}, "wan", 0, 18, 22, "assumed device MTU 1500"},
}

var backends = []config.Backend{config.NSS, config.Cake, config.FQCodel}

var rates = []int{1000, 20000, 99000, 100000, 300000}

func baseQueue(b config.Backend, iface string, rate int) config.Queue {
	return config.Queue{Section: "s", Interface: iface, Backend: b, Upload: rate, Download: rate, IngressECN: true}
}

// TestMatrix checks every connection type × backend × rate band against
// the rules of docs/design.md.
func TestMatrix(t *testing.T) {
	for _, c := range conns {
		for _, b := range backends {
			for _, rate := range rates {
				q := baseQueue(b, c.iface, rate)
				q.Overhead = c.overhead
				p := mustBuild(t, q, c.f)
				oh := c.cpu
				if b == config.NSS {
					oh = c.nssOH
				}
				devMTU := c.f.MTU
				if devMTU == 0 {
					devMTU = 1500
				}
				mtu := devMTU + oh
				if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, c.noteContain) }) {
					t.Errorf("%s/%s: no note contains %q: %q", c.name, b, c.noteContain, p.Notes)
				}
				for _, d := range p.Dirs {
					name := c.name + "/" + string(b) + "/" + strconv.Itoa(rate) + "/" + d.Direction.Side()
					if d.Overhead != oh || d.MTU != mtu {
						t.Errorf("%s: overhead %d mtu %d, want %d %d", name, d.Overhead, d.MTU, oh, mtu)
					}
					checkRules(t, name, b, rate, mtu, d)
				}
			}
		}
	}
}

// checkRules asserts the docs/design.md properties of one direction.
func checkRules(t *testing.T, name string, b config.Backend, rate, mtu int, d *Dir) {
	t.Helper()
	if b == config.Cake {
		if d.Limit != 0 || d.Burst != 0 || d.FQQuantum != 0 || !d.ECN || d.Interval != 100*time.Millisecond {
			t.Errorf("%s: cake dir %+v", name, d)
		}
		return
	}
	// limit: 30 ms of packets at line rate, floor 200.
	bytes30ms := rate * 1000 / 8 * 30 / 1000
	if d.Limit < 200 || (d.Limit > 200 && (d.Limit*mtu > bytes30ms || (d.Limit+1)*mtu <= bytes30ms)) ||
		(d.Limit == 200 && 201*mtu <= bytes30ms) {
		t.Errorf("%s: limit %d for %d bytes in 30 ms at mtu %d", name, d.Limit, bytes30ms, mtu)
	}
	// burst: 1000 µs at rate, at least one 33-cell ATM packet; nsstbl in whole MTUs.
	raw := rate / 8
	atm := (mtu + 48 + 47) / 48 * 53 // ceil((mtu+48)/48) cells
	want := max(raw, atm)
	if b == config.NSS {
		if d.Burst%mtu != 0 || d.Burst < want || d.Burst-mtu >= want {
			t.Errorf("%s: nss burst %d, want %d rounded up to a multiple of %d", name, d.Burst, want, mtu)
		}
	} else if d.Burst != want {
		t.Errorf("%s: burst %d, want %d", name, d.Burst, want)
	}
	if b == config.FQCodel && d.Quantum != min(max(raw, mtu), 60000) {
		t.Errorf("%s: htb quantum %d", name, d.Quantum)
	}
	wantQ := mtu
	if rate < 100000 {
		wantQ = mtu/5 + 1
	}
	if d.FQQuantum != wantQ || d.Flows != 1024 {
		t.Errorf("%s: quantum %d flows %d, want %d 1024", name, d.FQQuantum, d.Flows, wantQ)
	}
	wantT := 5 * time.Millisecond
	wantI := 100 * time.Millisecond
	if rate == 1000 {
		wantT, wantI = 13992*time.Microsecond, 108992*time.Microsecond
	}
	if d.Target != wantT || d.Interval != wantI {
		t.Errorf("%s: target %v interval %v, want %v %v", name, d.Target, d.Interval, wantT, wantI)
	}
	if d.ECN != (d.Direction == config.Download) {
		t.Errorf("%s: ECN %v", name, d.ECN)
	}
}

// TestNumbers pins the literal values for the ethernet connection.
func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		b                             config.Backend
		rate                          int
		limit, burst, htbQ, q         int
		target, interval              time.Duration
		leafTarget, leafInterval, ecn string
	}{
		{config.NSS, 1000, 200, 3044, 0, 305, 13992 * time.Microsecond, 108992 * time.Microsecond, "13992us", "108992us", ""},
		{config.NSS, 2000, 200, 3044, 0, 305, 6996 * time.Microsecond, 101996 * time.Microsecond, "6996us", "101996us", ""},
		{config.NSS, 20000, 200, 3044, 0, 305, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", ""},
		{config.NSS, 99000, 243, 13698, 0, 305, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", ""},
		{config.NSS, 100000, 246, 13698, 0, 1522, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", ""},
		{config.NSS, 300000, 739, 38050, 0, 1522, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", ""},
		{config.FQCodel, 1000, 200, 1749, 1518, 304, 13992 * time.Microsecond, 108992 * time.Microsecond, "13992us", "108992us", "noecn"},
		{config.FQCodel, 2798, 200, 1749, 1518, 304, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
		{config.FQCodel, 20000, 200, 2500, 2500, 304, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
		{config.FQCodel, 99000, 244, 12375, 12375, 304, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
		{config.FQCodel, 100000, 247, 12500, 12500, 1518, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
		{config.FQCodel, 300000, 741, 37500, 37500, 1518, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
		{config.FQCodel, 600000, 1482, 75000, 60000, 1518, 5 * time.Millisecond, 100 * time.Millisecond, "5ms", "100ms", "noecn"},
	} {
		name := string(tc.b) + "/" + strconv.Itoa(tc.rate)
		q := baseQueue(tc.b, "eth0", tc.rate)
		q.Download = 0
		p := mustBuild(t, q, linkinfo.Facts{MTU: 1500, Kind: "ether"})
		d := p.Dirs[0]
		if d.Limit != tc.limit || d.Burst != tc.burst || d.Quantum != tc.htbQ || d.FQQuantum != tc.q ||
			d.Target != tc.target || d.Interval != tc.interval {
			t.Errorf("%s: limit %d burst %d htbq %d q %d target %v interval %v", name, d.Limit, d.Burst, d.Quantum, d.FQQuantum, d.Target, d.Interval)
		}
		leaf := line(d.TC[len(d.TC)-1])
		for _, w := range []string{"limit " + strconv.Itoa(tc.limit), "target " + tc.leafTarget, "interval " + tc.leafInterval, tc.ecn} {
			if !strings.Contains(leaf, w) {
				t.Errorf("%s: leaf %q lacks %q", name, leaf, w)
			}
		}
		if tc.b == config.NSS && strings.Contains(leaf, "ecn") {
			t.Errorf("%s: egress nss leaf has ecn by default: %q", name, leaf)
		}
	}
}

// TestPlanRates: the planned rates by direction, 0 where the plan does not
// shape (what the rate state records and a follower starts from).
func TestPlanRates(t *testing.T) {
	eth := linkinfo.Facts{MTU: 1500, Proto: "dhcp"}
	for _, want := range []config.Rates{{Download: 40000, Upload: 8000}, {Download: 40000}, {Upload: 8000}} {
		q := baseQueue(config.Cake, "eth0", 0)
		q.Download, q.Upload = want.Download, want.Upload
		if got := mustBuild(t, q, eth).Rates(); got != want {
			t.Errorf("Rates() = %+v, want %+v", got, want)
		}
	}
}
