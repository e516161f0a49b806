package main

import (
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
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
			[]string{"option device 'wan'", "option proto 'static'"}, []string{"overhead", "8021q"}},
		{"vdsl nss", profile.Profile{LinkLayer: "ptm", Encap: profile.Encap{PPPoE: true, VLAN: 7}}, "pppoe-wan", "nss",
			[]string{"option interface 'pppoe-wan'", "option script 'nss-zk.qos'", "option linklayer 'ethernet'"},
			[]string{"option device 'wan.7'", "option proto 'pppoe'", "option vid '7'", "option name 'wan.7'"}, []string{"overhead"}},
		{"adsl fq_codel", profile.Profile{LinkLayer: "atm"}, "wan", "fq_codel",
			[]string{"option qdisc 'fq_codel'", "option script 'simple.qos'", "option linklayer 'atm'"},
			nil, []string{"overhead"}},
		{"adsl nss: no size table", profile.Profile{LinkLayer: "atm"}, "wan", "nss",
			[]string{"option linklayer 'ethernet'"}, nil, []string{"overhead", "'atm'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sqm, network := routerUCI(&tt.p, tt.dev, tt.b, 38000, 7600)
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

func TestLeftovers(t *testing.T) {
	before := "qdisc noqueue 0: dev lo root refcnt 2\nqdisc noqueue 0: dev wan root refcnt 2\n"
	tests := []struct {
		name       string
		after      string
		ifbs       []string
		keep, want int
	}{
		{"clean", before, nil, 0, 0},
		{"root left", before + "qdisc cake 1: dev wan root refcnt 2 bandwidth 7600Kbit\n", nil, 0, 1},
		{"ingress and IFB left", before + "qdisc ingress ffff: dev wan parent ffff:fff1\n", []string{"ifb4wan"}, 0, 2},
		{"nss keeps a bare IFB", before + "qdisc noqueue 0: dev ifb@wan root refcnt 2\n", []string{"ifb@wan"}, 1, 0},
		{"nss keeps an IFB with the default qdisc", before + "qdisc fq_codel 0: dev ifb@wan root refcnt 2 limit 10240p\n", []string{"ifb@wan"}, 1, 0},
		{"nss IFB still shaped", before + "qdisc nssfq_codel 10: dev ifb@wan parent 1:\n", []string{"ifb@wan"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := leftovers(before, tt.after, []string{"ifb0"}, append([]string{"ifb0"}, tt.ifbs...), tt.keep == 1)
			if len(got) != tt.want {
				t.Errorf("leftovers = %q, want %d", got, tt.want)
			}
		})
	}
}

func TestIperfRates(t *testing.T) {
	js := `{"end":{"sum_received":{"bits_per_second":36000000},"sum_received_bidir_reverse":{"bits_per_second":30000000}}}`
	for _, tt := range []struct {
		phase    string
		down, up float64
	}{{accept.Download, 36, 0}, {accept.Upload, 0, 36}, {accept.Bidir, 30, 36}} {
		d, u, err := iperfRates(js, tt.phase)
		if err != nil || d != tt.down || u != tt.up {
			t.Errorf("%s: %v %v %v, want %v %v", tt.phase, d, u, err, tt.down, tt.up)
		}
	}
	if _, _, err := iperfRates(`{"error":"unable to connect to server"}`, accept.Download); err == nil || !strings.Contains(err.Error(), "unable to connect") {
		t.Errorf("iperf3 error not passed on: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {0.5, 3}, {0.95, 4.8}, {1, 5}} {
		if got := quantile(v, tt.q); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if v[0] != 5 {
		t.Error("quantile sorted its input in place")
	}
}

func TestDoctorCheck(t *testing.T) {
	for _, tt := range []struct {
		out string
		ok  bool
	}{
		{`{"findings":[{"severity":"ok"},{"severity":"warn"}]}`, true},
		{`{"findings":[{"severity": "fail","id":"dead-qdisc"}]}`, false},
		{`doctor: cannot read tc`, false},
	} {
		if c := doctorCheck(tt.out); c.OK != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.out, c.OK, tt.ok)
		}
	}
}

func TestKernelModeArgs(t *testing.T) {
	in := []string{"pty", "/usr/sbin/pppoe -n -I m0.7 -e 3:aa:bb:cc:dd:ee:ff -S ''", "file", "/tmp/o", "10.2.0.2:10.2.0.1", "nodetach", "noaccomp"}
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
