package drift

import (
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/linkinfo"
	"github.com/sqmkit/sqmkit/internal/plan"
	"github.com/sqmkit/sqmkit/internal/tc/tcfake"
)

// applied returns a simulated kernel holding p, plus the change lines.
func applied(t *testing.T, p *plan.Plan, change ...[]string) *tcfake.Kernel {
	t.Helper()
	k := &tcfake.Kernel{}
	k.AddDevice(p.Device, true)
	for _, d := range p.Dirs {
		if _, err := k.Batch("ip", false, d.Setup); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Batch("tc", false, d.TC); err != nil {
			t.Fatal(err)
		}
	}
	if len(change) > 0 {
		if _, err := k.Batch("tc", false, change); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func TestCompare(t *testing.T) {
	q := func(b config.Backend) config.Queue {
		return config.Queue{Section: "wan", Interface: "wan", Download: 20000, Upload: 10000, Backend: b, IngressECN: true, LinkLayer: config.LinkNone}
	}
	f := linkinfo.Facts{Device: "wan", Exists: true, MTU: 1500}
	for _, c := range []struct {
		name   string
		b      config.Backend
		change [][]string
		want   []string // one substring per expected diff, in order
	}{
		{"htb as planned", config.FQCodel, nil, nil},
		{"cake as planned", config.Cake, nil, nil},
		{"nss as planned", config.NSS, nil, nil},
		{"htb rate", config.FQCodel, [][]string{{"class", "change", "dev", "wan", "parent", "1:", "classid", "1:1", "htb", "rate", "9000kbit"}},
			[]string{"rate: kernel 9 Mbit/s, config 10 Mbit/s"}},
		{"cake bandwidth and overhead", config.Cake, [][]string{{"qdisc", "change", "dev", "ifb4wan", "root", "cake", "bandwidth", "30000kbit", "overhead", "44"}},
			[]string{"rate: kernel 30 Mbit/s, config 20 Mbit/s", "overhead: kernel 44, config 18"}},
		{"nss limit and target", config.NSS, [][]string{{"qdisc", "change", "dev", "wan", "parent", "1:", "handle", "10:", "nssfq_codel", "limit", "999", "target", "7ms"}},
			[]string{"limit: kernel 999p, config 200p", "target: kernel 7ms, config 5ms"}},
		{"redirect gone", config.Cake, [][]string{{"qdisc", "del", "dev", "wan", "ingress"}},
			[]string{"missing: qdisc ingress ffff: on wan (parent ingress)", "missing: filter u32  on wan (parent ingress) redirecting to ifb4wan"}},
		{"an extra leaf", config.NSS, [][]string{{"qdisc", "add", "dev", "ifb@wan", "parent", "10:", "handle", "20:", "pfifo"}},
			[]string{"not planned: qdisc pfifo 20: on ifb@wan (parent 10:)"}},
		{"another root", config.FQCodel, [][]string{{"qdisc", "del", "dev", "wan", "root"}, {"qdisc", "add", "dev", "wan", "root", "handle", "1:", "cake", "bandwidth", "10000kbit"}},
			[]string{"missing: qdisc htb 1:", "missing: class htb 1:1", "missing: qdisc fq_codel 10:", "root qdisc: kernel cake, config htb", "not planned: qdisc cake 1: on wan"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := plan.Build(q(c.b), f)
			if err != nil {
				t.Fatal(err)
			}
			k := applied(t, p, c.change...)
			s, err := k.Read(p.Device, p.IFB)
			if err != nil {
				t.Fatal(err)
			}
			ds := Compare(p, s)
			if len(ds) != len(c.want) {
				t.Fatalf("diffs %q, want %d: %q", ds, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(ds[i].String(), w) {
					t.Errorf("diff %d = %q, want it to contain %q", i, ds[i], w)
				}
			}
		})
	}
}

// Pasted output without filters or classes cannot judge them: they are
// not reported missing.
func TestUnknownParts(t *testing.T) {
	p, err := plan.Build(config.Queue{Section: "wan", Interface: "wan", Download: 20000, Upload: 10000, Backend: config.FQCodel, LinkLayer: config.LinkNone},
		linkinfo.Facts{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	k := applied(t, p)
	s, err := k.Read() // qdiscs only, as pasted `tc -s qdisc show`
	if err != nil {
		t.Fatal(err)
	}
	if ds := Compare(p, s); len(ds) != 3 {
		t.Errorf("without classes and filters read: %q, want the two classes and the filter missing", ds)
	}
	s.NoClasses, s.NoFilters = true, true
	if ds := Compare(p, s); len(ds) != 0 {
		t.Errorf("classes and filters unknown: %q, want nothing", ds)
	}
}
