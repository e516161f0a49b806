package main

import (
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
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

func TestShapedDev(t *testing.T) {
	pppoe := &topo{wanDev: pppIfname}
	plain := &topo{wanDev: "wan.7"}
	for _, tt := range []struct {
		t       *topo
		backend string
		want    string
	}{{pppoe, "nss", "wan"}, {pppoe, "cake", "pppoe-wan"}, {pppoe, "fq_codel", "pppoe-wan"}, {plain, "nss", "wan"}, {plain, "cake", "wan.7"}} {
		if got := tt.t.shapedDev(tt.backend); got != tt.want {
			t.Errorf("%s on %s: shapedDev = %s, want %s", tt.backend, tt.t.wanDev, got, tt.want)
		}
	}
}

func TestFirstP95(t *testing.T) {
	// A 30 s phase at 1 probe/s from t=5: a 100 ms spike in its first
	// second, steady 20 ms after; sqmkit's baseline is 20 ms.
	r := &bbresult.Result{}
	for i := 0; i < 30; i++ {
		rtt := 20.0
		if i == 0 {
			rtt = 120
		}
		r.Samples.Probes = append(r.Samples.Probes, bbresult.Probe{T: 5 + float64(i), RTT: rtt})
	}
	r.Samples.Probes = append(r.Samples.Probes, bbresult.Probe{T: 6.5, Lost: "down"})
	long := bbresult.Phase{Start: 5, End: 35, AddedP95: 5, Latency: bbresult.Stats{P95: 25}}
	got := firstP95(r, long)
	// First 10 s: one 120 among nine 20s -> p95 = 20 + 0.55*100 = 75 ms, added 55.
	if got == nil || math.Abs(*got-55) > 1e-9 {
		t.Errorf("firstP95 = %v, want 55", got)
	}
	if got := firstP95(r, bbresult.Phase{Start: 5, End: 15}); got != nil {
		t.Errorf("10 s phase: firstP95 = %v, want nil (the graded p95 already is the first 10 s)", *got)
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
		{`{"findings":[{"severity":"bogus"}]}`, false},                                 // not the doctor's report
		{`{"findings":[{"severity":"warn","subject":"\"severity\":\"fail\""}]}`, true}, // a regex would count this
	} {
		if c := doctorCheck(tt.out); c.OK != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.out, c.OK, tt.ok)
		}
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

func TestPrintTable(t *testing.T) {
	m := &accept.Measurement{Tool: "sqmkit dev", Grade: "A", Phases: []accept.Phase{
		{Name: accept.Download, AddedMedian: 2.3, AddedP95: 25.1, DownMbps: 6.3},
		{Name: accept.Upload, AddedMedian: 10.8, AddedP95: 70, UpMbps: 0.7},
		{Name: accept.Bidir, AddedMedian: 27, AddedP95: 62.5, DownMbps: 6.2, UpMbps: 0.5},
	}}
	rs := []result{{
		Profile: "adsl-atm", Backend: "cake", Status: "limitation", Limitation: "ATM at 1 Mbit/s", Test: m,
		Checks:      []accept.Check{{Name: "upload median added ms", Got: 10.8, Want: "<= 5"}, {Name: "download goodput", Got: 6.3, Want: ">= 6", OK: true}},
		CrossChecks: []accept.Check{{Name: "upload Mbit/s", Got: 0.7, Want: "0.8 ± 5% (iperf3+irtt)"}},
	}, {Profile: "cable", Backend: "nss", Status: "error", Error: "start changed no qdisc", Dir: "/r/cable/nss"},
		{Profile: "vdsl", Backend: "nss", Status: "pass", Test: m, FirstTry: &firstTry{Checks: []accept.Check{{Name: "download median added ms", Got: 6.9}}}}}
	var b strings.Builder
	printTable(&b, rs)
	out := b.String()
	for _, want := range []string{
		"adsl-atm  cake     limitation  A      2.3 / 25.1",
		"10.8 / 70.0          27.0 / 62.5         6.3 / 0.7",
		"6.3 / 0.7",
		"adsl-atm/cake: FAIL upload median added ms = 10.8 (want <= 5)",
		"adsl-atm/cake: expected limitation: ATM at 1 Mbit/s",
		"adsl-atm/cake: cross-check differs (recorded, not graded): upload Mbit/s = 0.7 vs 0.8 ± 5% (iperf3+irtt)",
		"cable/nss: error: start changed no qdisc (logs in /r/cable/nss)",
		"vdsl/nss: graded twice; the first try missed download median added ms 6.9",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "download goodput") {
		t.Errorf("a passing check was printed:\n%s", out)
	}
}

func TestRegrade(t *testing.T) {
	lat := accept.Check{Name: "download median added ms", Got: 6.9, Want: "<= 5", Latency: true}
	p95 := accept.Check{Name: "bidirectional p95 added ms", Got: 15.2, Want: "<= 15", Latency: true}
	good := accept.Check{Name: "download goodput Mbit/s", Got: 20, Want: ">= 24"}
	doc := accept.Check{Name: "doctor fail findings", Got: 1, Want: "0"}
	ok := accept.Check{Name: "upload median added ms", Got: 1, Want: "<= 5", OK: true, Latency: true}
	for _, tt := range []struct {
		name       string
		checks     []accept.Check
		limitation string
		want       bool
	}{
		{"all passed", []accept.Check{ok}, "", false},
		{"latency only", []accept.Check{ok, lat, p95}, "", true},
		{"goodput too", []accept.Check{lat, good}, "", false},
		{"doctor", []accept.Check{lat, doc}, "", false},
		{"known limitation", []accept.Check{lat}, "ATM", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := regrade(tt.checks, tt.limitation); got != tt.want {
				t.Errorf("regrade = %v, want %v", got, tt.want)
			}
		})
	}
	r := result{Test: &accept.Measurement{Tool: "sqmkit dev", Grade: "A+"},
		FirstTry: &firstTry{Checks: []accept.Check{ok, lat}}}
	if got := summaryLine(&r); !strings.Contains(got, "(second try; first missed download median added ms 6.9)") {
		t.Errorf("summary %q does not say it is a second try", got)
	}
}
