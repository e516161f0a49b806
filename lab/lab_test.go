package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/profile"
)

func TestRouterUCI(t *testing.T) {
	tests := []struct {
		name    string
		p       profile.Profile
		dev, b  string
		sqm     []string
		network []string
		not     []string
	}{
		{"cable cake", profile.Profile{LinkLayer: "ethernet"}, "wan", "cake",
			[]string{"option interface 'wan'", "option download '38000'", "option qdisc 'cake'", "option script 'piece_of_cake.qos'", "option linklayer 'ethernet'"},
			[]string{"option device 'wan'", "option proto 'static'"}, []string{"overhead", "8021q", "use_mq"}},
		{"cable cake_mq", profile.Profile{LinkLayer: "ethernet"}, "wan", "cake_mq",
			[]string{"option qdisc 'cake'", "option script 'piece_of_cake.qos'", "option use_mq '1'"}, nil, []string{"overhead"}},
		{"vdsl nss", profile.Profile{LinkLayer: "ptm", Encap: profile.Encap{PPPoE: true, VLAN: 7}}, "pppoe-wan", "nss",
			[]string{"option interface 'pppoe-wan'", "option script 'nss-zk.qos'", "option linklayer 'ethernet'"},
			[]string{"option device 'wan.7'", "option proto 'pppoe'", "option vid '7'", "option name 'wan.7'"}, []string{"overhead"}},
		{"vdsl nss on the physical port", profile.Profile{LinkLayer: "ptm", Encap: profile.Encap{PPPoE: true, VLAN: 7}}, "wan", "nss",
			[]string{"option interface 'wan'", "option script 'nss-zk.qos'"},
			[]string{"config interface 'wan'\n\toption device 'wan.7'\n\toption proto 'pppoe'"}, []string{"overhead"}},
		{"adsl fq_codel", profile.Profile{LinkLayer: "atm"}, "wan", "fq_codel",
			[]string{"option qdisc 'fq_codel'", "option script 'simple.qos'", "option linklayer 'atm'"},
			nil, []string{"overhead"}},
		{"adsl nss: no size table", profile.Profile{LinkLayer: "atm"}, "wan", "nss",
			[]string{"option linklayer 'ethernet'"}, nil, []string{"overhead", "'atm'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sqm, network := routerUCI(&tt.p, tt.dev, tt.b, "", 38000, 7600)
			for _, w := range tt.sqm {
				if !strings.Contains(sqm, w) {
					t.Errorf("sqm lacks %q:\n%s", w, sqm)
				}
			}
			for _, w := range tt.network {
				if !strings.Contains(network, w) {
					t.Errorf("network lacks %q:\n%s", w, network)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(sqm+network, w) {
					t.Errorf("config holds %q; the overhead must be left to detection", w)
				}
			}
		})
	}
}

func TestKernelModeArgs(t *testing.T) {
	in := []string{"pty", "/usr/sbin/pppoe -n -I m0.7 -e 3:aa:bb:cc:dd:ee:ff -S ''", "file", "/tmp/o", "10.2.0.2:10.2.0.3", "nodetach", "noaccomp"}
	got, err := kernelModeArgs(in, "/p/rp-pppoe.so")
	want := "plugin /p/rp-pppoe.so rp_pppoe_sess 3:aa:bb:cc:dd:ee:ff nic-m0.7 file /tmp/o 10.2.0.2:10.2.0.1 nodetach noaccomp"
	if err != nil || strings.Join(got, " ") != want {
		t.Errorf("got %q, %v\nwant %q", got, err, want)
	}
	for _, bad := range [][]string{{"file", "x"}, {"pty", "pppoe -n -I m0"}} {
		if _, err := kernelModeArgs(bad, "p"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestExitStatus: a run exits 0 only when every scenario proved its
// claim; a failure exits 1, and a run that could not measure something
// (inconclusive, unproven) and failed nothing exits 3 and says which.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		status []string
		want   int
		line   string
	}{
		{[]string{"pass", "limitation"}, exitProven, "proven: all 2 scenarios"},
		{[]string{"pass", "unproven"}, exitUnmeasured, "NOT PROVEN: p/b1 could not be measured on this host (1 of 2 proven)"},
		{[]string{"inconclusive", "pass", "inconclusive"}, exitUnmeasured, "NOT PROVEN: p/b0, p/b2 could not be measured on this host (1 of 3 proven)"},
		{[]string{"pass", "fail", "inconclusive"}, exitFailed, "FAILED: p/b1 (1 proven, 1 not measured)"},
		{[]string{"error", "pass"}, exitFailed, "FAILED: p/b0"},
	} {
		var rs []result
		for i, s := range tc.status {
			rs = append(rs, result{Status: s, Profile: "p", Backend: fmt.Sprintf("b%d", i)})
		}
		code, line := verdict(rs)
		if code != tc.want || !strings.Contains(line, tc.line) || exitStatus(rs) != code {
			t.Errorf("%v: %d %q, want %d %q", tc.status, code, line, tc.want, tc.line)
		}
	}
}
