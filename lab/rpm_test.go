package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/refserver"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// TestSameLetters: the reference server's letters against sqmkit serve's,
// overall (the mean of download and upload) and per one-way phase, how
// many apart; two means astride an edge and within 5 % of it agree.
func TestSameLetters(t *testing.T) {
	m := func(down, up float64) accept.Measurement {
		return accept.Measurement{Phases: []accept.Phase{{Name: accept.Download, AddedMean: down}, {Name: accept.Upload, AddedMean: up},
			{Name: accept.Bidir, AddedMean: 999}}}
	}
	for _, tc := range []struct {
		name     string
		ref, own accept.Measurement
		ok       []bool
		apart    []float64
	}{
		{"same", m(120, 40), m(110, 35), []bool{true, true, true}, []float64{0, 0, 0}},
		{"upload a letter off", m(120, 40), m(110, 70), []bool{true, true, false}, []float64{0, 0, 1}},
		{"astride 400 ms, within 5 %", m(376.1, 430.7), m(378.6, 412.6), []bool{true, true, true}, []float64{1, 0, 0}},
		{"astride 400 ms, one 6 % off", m(376, 450), m(370, 374), []bool{false, true, false}, []float64{1, 0, 1}},
		{"A+ is not A", m(2, 3), m(7.7, 3), []bool{false, false, true}, []float64{1, 1, 0}},
		{"two letters apart", m(50, 50), m(250, 50), []bool{false, false, true}, []float64{1, 2, 0}},
	} {
		cs := sameLetters(tc.ref, tc.own)
		if len(cs) != len(tc.ok) {
			t.Fatalf("%s: %d checks, want %d: %+v", tc.name, len(cs), len(tc.ok), cs)
		}
		for i, c := range cs {
			if c.OK != tc.ok[i] || c.Got != tc.apart[i] {
				t.Errorf("%s: %s: ok %v got %v, want %v %v", tc.name, c.Name, c.OK, c.Got, tc.ok[i], tc.apart[i])
			}
		}
	}
	if cs := sameLetters(accept.Measurement{}, m(1, 1)); len(cs) != 1 || cs[0].OK {
		t.Errorf("a test without phases: %+v", cs)
	}
}

// TestRPMBands: sqmkit's RPM in goresponsiveness's aggregation within
// ±25 % of goresponsiveness's, each named with how many rounds of its final
// window goresponsiveness kept; tune's rates within ±5 %;
// goresponsiveness's NaN kept as 0 (setTheirs), so the result stays JSON.
func TestRPMBands(t *testing.T) {
	rr := &rpmResult{SqmkitEarlier: [2]float64{124, 220}, Sqmkit: [2]float64{1300, 1400}}
	rr.setTheirs(refserver.Theirs{RPM: 100, Conns: 16, Rounds: 39, Kept: 8}, refserver.Theirs{RPM: 300, Conns: 16})
	cs := rpmChecks(rr, false)
	if len(cs) != 2 || !cs[0].OK || cs[1].OK || cs[1].Unproven != "" || !strings.HasPrefix(cs[1].Name, "upload") {
		t.Errorf("rpmChecks: %+v", cs)
	}
	// how many of goresponsiveness's final-window rounds returned, where
	// its --debug output said
	if !strings.HasSuffix(cs[0].Name, "kept 8 of the 39 probe rounds of its final window") || strings.Contains(cs[1].Name, "kept") {
		t.Errorf("rpmChecks' names: %q, %q", cs[0].Name, cs[1].Name)
	}
	// goresponsiveness without a probe in its last window, and with an
	// upload whose load generator gave up: neither is graded
	rr = &rpmResult{SqmkitEarlier: [2]float64{124, 220}}
	rr.setTheirs(refserver.Theirs{RPM: math.NaN(), Conns: 16}, refserver.Theirs{RPM: 1073})
	cs = rpmChecks(rr, false)
	if cs[0].OK || cs[0].Unproven == "" || cs[1].OK || !strings.Contains(cs[1].Unproven, "gave up") || !accept.Unproven(cs) {
		t.Errorf("rpmChecks without goresponsiveness's figures: %+v", cs)
	}
	if _, err := json.Marshal(result{RPM: rr, Checks: cs}); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		url, serve int
		ok         bool
	}{{95000, 100000, true}, {94900, 100000, false}, {105000, 100000, true}, {105100, 100000, false}, {0, 0, false}} {
		if c := tuneBand("download", tc.url, tc.serve); c.OK != tc.ok {
			t.Errorf("tuneBand(%d, %d) = %+v, want ok %v", tc.url, tc.serve, c, tc.ok)
		}
	}
}

// TestRPMLine: make lab's line beside an rpm row says whose grade the row
// is, both clients' RPM, and both tunes.
func TestRPMLine(t *testing.T) {
	rr := &rpmResult{Own: &accept.Measurement{Grade: "F"}, Goresponsiveness: [2]float64{math.NaN(), 85}, GoresponsivenessConns: [2]int{16, 0},
		Sqmkit: [2]float64{446, 989}, SqmkitEarlier: [2]float64{184, 325}, TuneServe: &[2]int{7881, 998}, TuneURL: &[2]int{7734, 992}}
	got := rpmLine(rr)
	for _, want := range []string{"sqmkit serve's on the same path: F", "goresponsiveness NaN/85 on 16/0 connections", "sqmkit 446/989", "7881/998 kbit/s against sqmkit serve, 7734/992 against the reference server"} {
		if !strings.Contains(got, want) {
			t.Errorf("rpmLine lacks %q: %s", want, got)
		}
	}
}

// TestTuneChecks: tune against the URL within ±5 % of tune against sqmkit
// serve; where only the URL's tune found the router's CPU the bound, lower
// rates leave the band unproven and the CPU verdict is held to the lab's
// gauge (here none, so that check fails), while higher ones still fail.
func TestTuneChecks(t *testing.T) {
	bound := &bbresult.PhaseCPU{Phase: "bidirectional", Bound: true, Busiest: 1, BusiestShare: 0.93, ShapedMbps: 33.9, SelfCores: 1}
	outcome := func(down, up int, cpu *bbresult.PhaseCPU) *tune.Outcome {
		return &tune.Outcome{Search: &search.Result{Download: search.Choice{RateKbit: down}, Upload: search.Choice{RateKbit: up}, BidirCPU: cpu}}
	}
	for _, tc := range []struct {
		name       string
		serve, ref *tune.Outcome
		checks     int
		unproven   []bool // per band check
		ok         []bool
	}{
		{"within", outcome(39500, 7900, nil), outcome(38000, 7800, nil), 2, []bool{false, false}, []bool{true, true}},
		{"lower, no CPU bound", outcome(39500, 7900, nil), outcome(29000, 5800, nil), 2, []bool{false, false}, []bool{false, false}},
		{"lower, CPU-bound against the URL", outcome(39500, 7900, nil), outcome(29000, 5800, bound), 3, []bool{true, true}, []bool{false, false, false}},
		{"higher, CPU-bound against the URL", outcome(30000, 6000, nil), outcome(39500, 7900, bound), 3, []bool{false, false}, []bool{false, false, false}},
		{"CPU-bound against both", outcome(39500, 7900, bound), outcome(29000, 5800, bound), 2, []bool{false, false}, []bool{false, false}},
	} {
		cs, err := (&guest{}).tuneChecks(tc.serve, tc.ref)
		if err != nil || len(cs) != tc.checks {
			t.Fatalf("%s: %d checks, %v: %+v", tc.name, len(cs), err, cs)
		}
		for i, c := range cs {
			if c.OK != tc.ok[i] || i < 2 && (c.Unproven != "") != tc.unproven[i] {
				t.Errorf("%s: check %d = %+v, want ok %v, unproven %v", tc.name, i, c, tc.ok[i], tc.unproven[min(i, 1)])
			}
		}
		if tc.checks == 3 && !strings.Contains(cs[2].Name, "CPU ceiling") {
			t.Errorf("%s: third check %q, want the CPU ceiling against the gauge", tc.name, cs[2].Name)
		}
	}
}

// TestGSOMaxSize reads the value endpointsHeld puts back, from the output
// of iproute2's `ip -d link show` (a veth in a namespace, as the lab's c0).
func TestGSOMaxSize(t *testing.T) {
	veth := `4: c0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000
    link/ether 5e:0b:1c:2d:3e:4f brd ff:ff:ff:ff:ff:ff link-netns router promiscuity 0  allmulti 0 minmtu 68 maxmtu 65535
    veth addrgenmode eui64 numtxqueues 1 numrxqueues 1 gso_max_size 65536 gso_max_segs 65535 tso_max_size 524280 tso_max_segs 65535 gro_max_size 65536 gso_ipv4_max_size 3000 gro_ipv4_max_size 65536
`
	for _, c := range []struct{ out, want string }{
		{veth, "65536"},
		{strings.Replace(veth, "gso_max_size 65536", "gso_max_size 3000", 1), "3000"},
	} {
		got, err := gsoMaxSize(c.out)
		if err != nil || got != c.want {
			t.Errorf("gsoMaxSize = %q, %v; want %q", got, err, c.want)
		}
	}
	if got, err := gsoMaxSize("4: c0: <UP> mtu 1500\n"); err == nil {
		t.Errorf("no field: got %q, want an error", got)
	}
}

// TestYardstick: the upload through a shaper, where goresponsiveness's own
// 16 kB frame takes more than a quarter of its loaded GET, is compared on
// its foreign half and says so; every other direction on the whole RPM.
func TestYardstick(t *testing.T) {
	rr := &rpmResult{SqmkitEarlier: [2]float64{110, 300}, Goresponsiveness: [2]float64{100, 100}, GoresponsivenessConns: [2]int{16, 16},
		GoresponsivenessMbps: [2]float64{36, 7.5}, GoresponsivenessLoaded: [2]float64{40, 200}, GoresponsivenessForeign: [2]float64{20, 30},
		SqmkitForeign: [2]float64{21, 33}, SqmkitLoaded: [2]float64{30, 60}}
	for _, tc := range []struct {
		name   string
		i      int
		shaped bool
		mbps   float64
		ratio  float64
		rule   string
	}{
		{"upload through cake, a frame of 280 ms", 1, true, 7.5, 30.0 / 33, "foreign half"},
		{"upload unshaped", 1, false, 7.5, 3, "whole RPM"},
		{"download through cake", 0, true, 36, 1.1, "whole RPM"},
		{"upload through cake, a fast frame", 1, true, 200, 3, "whole RPM"},
	} {
		rr.GoresponsivenessMbps[1] = tc.mbps
		ratio, halves, rule := yardstick(rr, tc.i, tc.shaped)
		if math.Abs(ratio-tc.ratio) > 1e-9 || !strings.HasPrefix(rule, tc.rule) || (tc.rule == "foreign half") != (halves != "") {
			t.Errorf("%s: ratio %v, %q, %q; want %v by the %s", tc.name, ratio, halves, rule, tc.ratio, tc.rule)
		}
	}
	rr.GoresponsivenessMbps[1] = 7.5
	if cs := rpmChecks(rr, true); !cs[0].OK || !cs[1].OK || !strings.HasPrefix(cs[1].Name, "upload RPM's foreign half") || !strings.HasPrefix(rr.Rule[0], "whole") {
		t.Errorf("rpmChecks through cake: %+v, rules %q", cs, rr.Rule)
	}
}
