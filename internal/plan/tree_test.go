package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
)

func TestIFBName(t *testing.T) {
	for _, tc := range []struct {
		iface string
		b     config.Backend
		want  string
	}{
		{"wan", config.NSS, "ifb@wan"},
		{"wan", config.Cake, "ifb4wan"},
		{"pppoe-wan", config.FQCodel, "ifb4pppoe-wan"},
		{"abcdefghijk", config.Cake, "ifb4abcdefghijk"}, // exactly 15 bytes: kept
	} {
		if got := IFBName(tc.iface, tc.b); got != tc.want {
			t.Errorf("IFBName(%q, %s) = %q, want %q", tc.iface, tc.b, got, tc.want)
		}
	}
	long := []string{"abcdefghijkl", "abcdefghijkm", "abcdefgXYZ12", "wlan0-wanlink1", "wlan0-wanlink2", "enp0s31f6.1001", "enp0s31f6.1002"}
	seen := map[string]string{}
	for _, b := range backends {
		for _, iface := range long {
			name := IFBName(iface, b)
			valid := config.Queue{Section: "t", Interface: "wan", IFB: name, Download: 1000, Backend: b, LinkLayer: config.LinkNone}.Validate()
			if len(name) != 15 || valid != nil {
				t.Errorf("IFBName(%q, %s) = %q: not a valid 15-byte name", iface, b, name)
			}
			if !strings.HasPrefix(name[4:], iface[:7]) {
				t.Errorf("IFBName(%q, %s) = %q: does not keep the first 7 bytes", iface, b, name)
			}
			if name != IFBName(iface, b) {
				t.Errorf("IFBName(%q) is not deterministic", iface)
			}
			if prev, dup := seen[name]; dup && prev != iface {
				t.Errorf("IFBName(%q) = IFBName(%q) = %q", iface, prev, name)
			}
			seen[name] = iface
		}
	}
}

func TestConfiguredIFBWins(t *testing.T) {
	q := baseQueue(config.Cake, "wan", 50000)
	q.IFB = "ifb0"
	p := mustBuild(t, q, linkinfo.Facts{MTU: 1500})
	if p.IFB != "ifb0" || p.Dirs[1].Device != "ifb0" || !strings.Contains(line(p.Dirs[1].TC[2]), "redirect dev ifb0") {
		t.Errorf("configured IFB not used: %+v", p.Dirs[1])
	}
}

// TestTreeShape checks per backend which commands, nodes and teardown
// lines each direction has, and that a zero rate drops its direction.
func TestTreeShape(t *testing.T) {
	for _, tc := range []struct {
		b       config.Backend
		kinds   []string // qdisc/class kinds on the shaping device
		action  string
		tcLines int // per direction, without the ingress redirect
	}{
		{config.NSS, []string{"qdisc nsstbl 1: root", "qdisc nssfq_codel 10: 1:"}, "action nssmirred redirect dev ifb@wan fromdev wan", 2},
		{config.Cake, []string{"qdisc cake 1: root"}, "action mirred egress redirect dev ifb4wan", 1},
		{config.FQCodel, []string{"qdisc htb 1: root", "class htb 1:1 root", "qdisc fq_codel 10: 1:1"}, "action mirred egress redirect dev ifb4wan", 3},
	} {
		b := string(tc.b)
		p := mustBuild(t, baseQueue(tc.b, "wan", 50000), linkinfo.Facts{MTU: 1500})
		ifb := IFBName("wan", tc.b)
		if p.IFB != ifb || len(p.Dirs) != 2 {
			t.Fatalf("%s: IFB %q, %d dirs", b, p.IFB, len(p.Dirs))
		}
		eg, in := p.Dirs[0], p.Dirs[1]
		for _, d := range []*Dir{eg, in} {
			var kinds []string
			for _, n := range d.Tree {
				if n.Dev == d.Device {
					kinds = append(kinds, n.Type+" "+n.Kind+" "+n.Handle+" "+n.Parent)
				}
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("%s %v: tree %q, want %q", b, d.Direction, kinds, tc.kinds)
			}
			for i, l := range d.TC[:tc.tcLines] {
				if !strings.Contains(line(l), "dev "+d.Device+" ") || l[1] != "add" {
					t.Errorf("%s %v: line %d %q is not an add on %s", b, d.Direction, i, line(l), d.Device)
				}
			}
		}
		if len(eg.TC) != tc.tcLines || eg.Setup != nil || !slices.EqualFunc(eg.Teardown, [][]string{{"qdisc", "del", "dev", "wan", "root"}}, slices.Equal) {
			t.Errorf("%s egress: tc %q setup %q teardown %q", b, eg.TC, eg.Setup, eg.Teardown)
		}
		wantSetup := [][]string{{"link", "add", "name", ifb, "type", "ifb"}, {"link", "set", "dev", ifb, "alias", IFBAlias, "up"}}
		wantDown := [][]string{{"qdisc", "del", "dev", "wan", "ingress"}, {"qdisc", "del", "dev", ifb, "root"}}
		if !slices.EqualFunc(in.Setup, wantSetup, slices.Equal) || !slices.EqualFunc(in.Teardown, wantDown, slices.Equal) {
			t.Errorf("%s ingress: setup %q teardown %q", b, in.Setup, in.Teardown)
		}
		n := len(in.TC)
		if n != tc.tcLines+2 || line(in.TC[n-2]) != "qdisc add dev wan handle ffff: ingress" ||
			line(in.TC[n-1]) != "filter add dev wan parent ffff: protocol all prio 10 u32 match u32 0 0 "+tc.action {
			t.Errorf("%s ingress: redirect is not last: %q", b, in.TC)
		}
		wan := in.Tree[len(in.Tree)-2:]
		if wan[0] != (Node{Dev: "wan", Type: "qdisc", Kind: "ingress", Handle: "ffff:", Parent: "ingress"}) ||
			wan[1] != (Node{Dev: "wan", Type: "filter", Kind: "u32", Parent: "ingress", Redirect: ifb}) ||
			!slices.EqualFunc(in.Redirect, in.TC[n-2:], slices.Equal) {
			t.Errorf("%s ingress: wan nodes %+v", b, wan)
		}

		for _, only := range []config.Direction{config.Upload, config.Download} {
			q := baseQueue(tc.b, "wan", 50000)
			if only == config.Upload {
				q.Download = 0
			} else {
				q.Upload = 0
			}
			p := mustBuild(t, q, linkinfo.Facts{MTU: 1500})
			if len(p.Dirs) != 1 || p.Dirs[0].Direction != only || (only == config.Upload) != (p.IFB == "") {
				t.Errorf("%s %v only: %d dirs, IFB %q", b, only, len(p.Dirs), p.IFB)
			}
		}
	}
}

func TestLinkLayer(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    config.Backend
		mod  func(*config.Queue)
		want string // substring of the egress root line
	}{
		{"htb stab ethernet", config.FQCodel, func(*config.Queue) {}, "root handle 1: stab overhead 18 linklayer ethernet mpu 64 htb default 1"},
		{"htb stab none", config.FQCodel, func(q *config.Queue) { q.LinkLayer = config.LinkNone }, "stab overhead 18 linklayer ethernet mpu 64 htb"},
		{"htb stab atm advanced", config.FQCodel, func(q *config.Queue) {
			q.LinkLayer, q.Overhead, q.TcMTU, q.TcTSIZE, q.TcMPU = config.LinkATM, 44, 2047, 128, 96
		}, "stab mtu 2047 tsize 128 overhead 44 linklayer atm mpu 96 htb"},
		{"cake ethernet", config.Cake, func(*config.Queue) {}, "overhead 18 mpu 64 noatm rtt 100ms"},
		{"cake atm", config.Cake, func(q *config.Queue) { q.LinkLayer, q.Overhead = config.LinkATM, 40 }, "overhead 40 mpu 64 atm rtt 100ms"},
		{"nss no stab", config.NSS, func(q *config.Queue) { q.LinkLayer, q.TcMTU = config.LinkEthernet, 2047 }, "nsstbl rate 50000kbit burst 7610 mtu 1522 accel_mode 0"},
	} {
		q := baseQueue(tc.b, "wan", 50000)
		tc.mod(&q)
		p := mustBuild(t, q, linkinfo.Facts{MTU: 1500})
		root := line(p.Dirs[0].TC[0])
		if !strings.Contains(root, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.name, root, tc.want)
		}
		if tc.b == config.NSS && strings.Contains(root, "stab") {
			t.Errorf("%s: stab on nss: %q", tc.name, root)
		}
	}
}

func TestCakeOptions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mod           func(*config.Queue)
		egress, ingrs string
	}{
		{"defaults", func(*config.Queue) {},
			"cake bandwidth 20000kbit besteffort dual-srchost nat overhead 18 mpu 64 noatm rtt 100ms",
			"cake bandwidth 40000kbit besteffort dual-dsthost nat ingress overhead 18 mpu 64 noatm rtt 100ms"},
		{"layer cake squash", func(q *config.Queue) { q.Diffserv, q.SquashDSCP, q.SquashIngress = "diffserv4", true, true },
			"cake bandwidth 20000kbit diffserv4 dual-srchost nat overhead 18 mpu 64 noatm rtt 100ms",
			"cake bandwidth 40000kbit besteffort dual-dsthost nat wash ingress overhead 18 mpu 64 noatm rtt 100ms"},
		{"rtt preset", func(q *config.Queue) { q.Diffserv, q.RTT = "diffserv3", "regional" },
			"cake bandwidth 20000kbit diffserv3 dual-srchost nat overhead 18 mpu 64 noatm regional",
			"cake bandwidth 40000kbit diffserv3 dual-dsthost nat ingress overhead 18 mpu 64 noatm regional"},
	} {
		q := baseQueue(config.Cake, "wan", 0)
		q.Upload, q.Download = 20000, 40000
		tc.mod(&q)
		p := mustBuild(t, q, linkinfo.Facts{MTU: 1500})
		for i, want := range []string{tc.egress, tc.ingrs} {
			if got := line(p.Dirs[i].TC[0]); !strings.HasSuffix(got, "root handle 1: "+want) {
				t.Errorf("%s %v:\n got %s\nwant ... %s", tc.name, p.Dirs[i].Direction, got, want)
			}
			if !p.Dirs[i].ECN {
				t.Errorf("%s: cake dir without ECN", tc.name)
			}
		}
	}
}

// TestPlanCakeMQ: use_mq plans cake_mq only on the cake backend and only
// on a direction with two or more queues, says why otherwise, refuses
// autorate-ingress beside it, and changes its rate on the root.
func TestPlanCakeMQ(t *testing.T) {
	mq := func(q config.Queue) config.Queue {
		q.Section, q.Interface, q.UseMQ, q.IngressECN = "wan", "eth1", true, true
		if q.Backend == "" {
			q.Backend = config.Cake
		}
		return q
	}
	for _, c := range []struct {
		name      string
		q         config.Queue
		tx, rx    int
		egress    string // root kind on eth1; "" when not shaped
		ingress   string // root kind on the IFB
		ifbQueues int
		note      string
	}{
		{"both ways", mq(config.Queue{Download: 50000, Upload: 20000}), 2, 2, "cake_mq", "cake_mq", 2, "cake_mq over 2 queues"},
		{"more RX than TX queues", mq(config.Queue{Download: 50000, Upload: 20000}), 2, 8, "cake_mq", "cake_mq", 8, "8 RX queues"},
		{"one TX queue, several RX queues", mq(config.Queue{Download: 50000, Upload: 20000}), 1, 4, "cake", "cake_mq", 4, "one TX queue"},
		{"queues unknown", mq(config.Queue{Download: 50000, Upload: 20000}), 0, 0, "cake", "cake", 1, "unknown here"},
		{"upload only", mq(config.Queue{Upload: 20000}), 4, 4, "cake_mq", "", 0, "cake_mq over 4 queues"},
		{"fq_codel", mq(config.Queue{Backend: config.FQCodel, Download: 50000, Upload: 20000}), 4, 4, "htb", "htb", 1, "only cake has a multi-queue variant"},
		{"off", config.Queue{Section: "wan", Interface: "eth1", Backend: config.Cake, Download: 50000, Upload: 20000}, 4, 4, "cake", "cake", 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustBuild(t, c.q, linkinfo.Facts{Device: "eth1", Exists: true, MTU: 1500, Kind: "ether", TXQueues: c.tx, RXQueues: c.rx})
			kinds := map[config.Direction]string{}
			for _, d := range p.Dirs {
				kinds[d.Direction] = d.Tree[0].Kind
				want := 1
				if d.Tree[0].Kind == "cake_mq" {
					want = map[config.Direction]int{config.Upload: c.tx, config.Download: c.rx}[d.Direction]
				}
				if d.Queues != want {
					t.Errorf("%s: a %s root over %d queues, want %d", d.Direction.Side(), d.Tree[0].Kind, d.Queues, want)
				}
				if d.Direction == config.Download {
					setup := line(d.Setup[0])
					if has := strings.Contains(setup, "numtxqueues"); has != (c.ifbQueues > 1) || c.ifbQueues > 1 && !strings.Contains(setup, fmt.Sprintf("numtxqueues %d ", c.ifbQueues)) {
						t.Errorf("IFB created with %q, want %d queues", setup, c.ifbQueues)
					}
				}
			}
			if kinds[config.Upload] != c.egress || kinds[config.Download] != c.ingress {
				t.Errorf("roots egress %q ingress %q, want %q %q", kinds[config.Upload], kinds[config.Download], c.egress, c.ingress)
			}
			notes := strings.Join(p.Notes, "\n")
			if c.note != "" && !strings.Contains(notes, c.note) || c.note == "" && strings.Contains(notes, "use_mq") {
				t.Errorf("notes lack %q:\n%s", c.note, notes)
			}
		})
	}

	q := mq(config.Queue{Download: 50000, Upload: 20000, IQdiscOpts: "autorate-ingress"})
	_, err := Build(q, linkinfo.Facts{Device: "eth1", MTU: 1500, TXQueues: 2, RXQueues: 2})
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Option != "iqdisc_opts" || !strings.Contains(err.Error(), "use_mq 0") {
		t.Errorf("autorate-ingress beside cake_mq: %v", err)
	}

	f := linkinfo.Facts{Device: "eth1", MTU: 1500, TXQueues: 2, RXQueues: 2}
	from := mustBuild(t, mq(config.Queue{Download: 50000, Upload: 20000}), f)
	to := mustBuild(t, mq(config.Queue{Download: 40000, Upload: 20000}), f)
	lines, err := Change(from.Dirs[1], to.Dirs[1])
	if err != nil || len(lines) != 1 || line(lines[0]) != "qdisc change dev ifb4eth1 root handle 1: cake_mq bandwidth 40000kbit" {
		t.Errorf("rate change %q %v", lines, err)
	}
}
