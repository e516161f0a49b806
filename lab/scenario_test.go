package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

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

func TestStatus(t *testing.T) {
	ok := accept.Check{Name: "a", OK: true}
	miss := accept.Check{Name: "b"}
	unproven := accept.Check{Name: "c", Unproven: "guest short of CPU"}
	for _, tc := range []struct {
		cs   []accept.Check
		want string
	}{
		{[]accept.Check{ok}, "pass"},
		{[]accept.Check{ok, unproven}, "unproven"},
		{[]accept.Check{miss, unproven}, "fail"},
		{[]accept.Check{unproven, miss}, "fail"},
		{[]accept.Check{ok, {Name: "d", OK: true, Unproven: "stale"}}, "pass"},
	} {
		if got := status(tc.cs); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.cs, got, tc.want)
		}
	}
}

// A profile graded and tuned in one run keeps both runs' files apart.
func TestProfileDir(t *testing.T) {
	graded, tuned := profileDir("/r", "cable", ""), profileDir("/r", "cable", "tune")
	if graded != "/r/cable" || tuned != "/r/cable-tune" || profileDir("/r", "cable", "sweep") != "/r/cable-sweep" {
		t.Errorf("graded %s, tuned %s", graded, tuned)
	}
}

func TestSummaryLineNoise(t *testing.T) {
	m := &accept.Measurement{Tool: "sqmkit dev", Grade: "A", Phases: []accept.Phase{
		{Name: accept.Download, AddedMedian: 10.9, AddedP95: 26.1, DownMbps: 35, Noise: &noise.Stats{Foreign: 0.031, Steal: 0.052, Max: 4.5, Busy: 0.634}},
		{Name: accept.Upload, AddedMedian: 0.8, AddedP95: 2.2, UpMbps: 7}}}
	fail := result{Status: "fail", Test: m, Checks: []accept.Check{{Name: "download median added ms", Got: 10.9, Want: "<= 5"}}}
	out := summaryLine(&fail)
	for _, want := range []string{
		"FAIL download median added ms = 10.9 (want <= 5)",
		"host during download: other processes and steal 3.1% of the CPU (gate 10%), vCPUs ran 63% and waited 5.2%, worst 4.5 ms per 10ms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("failed summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "host during upload") {
		t.Errorf("a phase without noise figures printed some:\n%s", out)
	}
	pass := result{Status: "pass", Test: m, Checks: []accept.Check{{Name: "download median added ms", Got: 1, Want: "<= 5", OK: true}}}
	out = summaryLine(&pass)
	if strings.Contains(out, "host during") {
		t.Errorf("a passing grade printed the host's noise:\n%s", out)
	}
	if !strings.Contains(out, "35.0/0.0 Mbit/s vCPUs 63% |") || strings.Count(out, "vCPUs") != 1 {
		t.Errorf("the summary should give the download phase's vCPU share and nothing for upload:\n%s", out)
	}
}

// A scenario's verdict line says "inconclusive" once, not twice, and an
// error and a failure say what they are.
func TestResultLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&inconclusive{phases: []string{"storm"}, tries: 1}, "inconclusive: host busy (no clean storm phase in 1 tries"},
		{errors.New("no PPPoE session"), "ERROR: no PPPoE session"},
		{nil, "PASS"},
	} {
		r := result{Status: "pass"}
		r.ended(tc.err)
		if got := r.line(); !strings.HasPrefix(got, tc.want) || strings.Count(strings.ToLower(got), "inconclusive") > 1 {
			t.Errorf("%v: %q, want it to begin %q", tc.err, got, tc.want)
		}
	}
}

// The verdict line counts every cause of a discarded measurement,
// the guest's missing headroom too.
func TestDiscardedKinds(t *testing.T) {
	ds := []discarded{{Cause: causeStarved}, {Cause: causeNoise}, {Cause: causeStarved}, {Cause: causeCollision}}
	if got, want := discardedKinds(ds), "1 host noise, 1 probe flow collision, 2 guest short of CPU"; got != want {
		t.Errorf("discardedKinds = %q, want %q", got, want)
	}
}

// A recorded limitation stands for the misses the link's physics can
// cause, never for a tune that missed the sweep's band or its time.
func TestLimited(t *testing.T) {
	calm := accept.Phase{AddedMedian: 1, AddedP95: 3, DownMbps: 7}
	slowUp := accept.Phase{Name: accept.Upload, AddedMedian: 9, AddedP95: 20}
	m := accept.Measurement{Phases: []accept.Phase{{Name: accept.Download, AddedMedian: 1, AddedP95: 3, DownMbps: 7}, slowUp,
		{Name: accept.Bidir, AddedMedian: calm.AddedMedian, AddedP95: calm.AddedP95}}}
	link := accept.Shaped(m, 7600)
	for _, tc := range []struct {
		name       string
		checks     []accept.Check
		limitation string
		want       string
	}{
		{"a link miss on a limited link", link, "ATM at 1 Mbit/s", "limitation"},
		{"a link miss on a link without one", link, "", "fail"},
		{"tune outside the sweep's band", append(slices.Clone(link), againstSweep("download", 7900, 7440)), "ATM at 1 Mbit/s", "fail"},
		{"tune over its time", append(slices.Clone(link), accept.Check{Name: "tune test time s", Got: 200, Want: "<= 180"}), "ATM at 1 Mbit/s", "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := result{Checks: tc.checks, Status: status(tc.checks)}
			r.limited(tc.limitation)
			if r.Status != tc.want || r.Limitation != tc.limitation {
				t.Errorf("status %q limitation %q, want %q", r.Status, r.Limitation, tc.want)
			}
		})
	}
}

// A lab built again on the same scratch directory starts from nothing.
func TestFreshDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	link := filepath.Join(dir, "root/etc/rc.d/S50sqmkit")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink("../init.d/sqmkit", link); err != nil {
		t.Fatal(err)
	}
	if err := freshDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../init.d/sqmkit", link); !os.IsNotExist(err) {
		t.Errorf("the earlier build's files are left (symlink: %v)", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("%s is not there as a directory: %v", dir, err)
	}
}
