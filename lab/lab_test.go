package main

import (
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

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		status []string
		want   int
	}{
		{[]string{"pass", "limitation"}, 0},
		{[]string{"pass", "unproven"}, 0},
		{[]string{"pass", "fail"}, 1},
		{[]string{"inconclusive"}, 1},
		{[]string{"error", "pass"}, 1},
	} {
		var rs []result
		for _, s := range tc.status {
			rs = append(rs, result{Status: s})
		}
		if got := exitStatus(rs); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.status, got, tc.want)
		}
	}
}
