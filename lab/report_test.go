package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/lab/internal/accept"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

func TestPrintTable(t *testing.T) {
	m := &accept.Measurement{Tool: "sqmkit dev", Grade: "A", Phases: []accept.Phase{
		{Name: accept.Download, AddedMedian: 2.3, AddedP95: 25.1, DownMbps: 6.3, Noise: &noise.Stats{Busy: 0.614}},
		{Name: accept.Upload, AddedMedian: 10.8, AddedP95: 70, UpMbps: 0.7, Noise: &noise.Stats{Busy: 0.39}},
		{Name: accept.Bidir, AddedMedian: 27, AddedP95: 62.5, DownMbps: 6.2, UpMbps: 0.5},
	}}
	rs := []result{{
		Profile: "adsl-atm", Backend: "cake", Status: "limitation", Limitation: "ATM at 1 Mbit/s", Test: m,
		Checks:      []accept.Check{{Name: "upload median added ms", Got: 10.8, Want: "<= 5"}, {Name: "download goodput", Got: 6.3, Want: ">= 6", OK: true}},
		CrossChecks: []accept.Check{{Name: "upload Mbit/s", Got: 0.7, Want: "0.8 ± 5% (iperf3+irtt)"}},
		Start:       &startCost{First: cost{WallMs: 812.4}, Warm: cost{WallMs: 96.2, Processes: 4, Execs: 3}},
	}, {Profile: "cable", Backend: "nss", Status: "error", Error: "start changed no qdisc", Dir: "/r/cable/nss"},
		{Profile: "cable", Backend: "fq_codel", Status: "inconclusive", Error: "inconclusive: host busy (no clean upload phase in 3 tries)", Dir: "/r/cable/fq_codel",
			Discarded: []discarded{{Phase: "upload", Run: "test", Why: "vCPUs stalled"}}},
		{Profile: "adsl-atm", Backend: "ext:htb-fifo", Status: "pass", Test: m, Start: &startCost{Warm: cost{Processes: -1}}},
		{Profile: "vdsl", Backend: "hotplug:cake", Status: "pass", FirstTry: "inconclusive: host busy (no clean storm phase in 1 tries)", Dir: "/r/vdsl/hotplug-cake"},
		{Profile: "cable", Backend: "cake", Status: "pass", Test: m, Tune: &tuned{LineDown: 40000, LineUp: 8000, Rule95Down: 38000, Rule95Up: 7600,
			Down: 39000, Up: 7300, BoostDown: 47000, TestSeconds: 151}, Sweep: &swept{From: 80, To: 100, Stop: 3, BestDown: 38800, BestUp: 7600, OneWayDown: 39200, OneWayUp: 7600, Steps: 17, WallSeconds: 170}}}
	var b strings.Builder
	printTable(&b, rs)
	out := b.String()
	for _, want := range []string{
		"\nadsl-atm\nbackend",
		"cake          limitation  A      2.3 / 25.1",
		"10.8 / 70.0          27.0 / 62.5         6.3 / 0.7               812 / 96             4 / 3                     61 / 39 / -\n",
		"ext:htb-fifo  pass        A      2.3 / 25.1",
		"\ncable\nbackend",
		"adsl-atm/cake: FAIL upload median added ms = 10.8 (want <= 5)",
		"adsl-atm/cake: expected limitation: ATM at 1 Mbit/s",
		"adsl-atm/cake: cross-check differs (recorded, not graded): upload Mbit/s = 0.7 vs 0.8 ± 5% (iperf3+irtt)",
		"cable/nss: error: start changed no qdisc (logs in /r/cable/nss)",
		"cable/fq_codel: inconclusive: host busy (no clean upload phase in 3 tries) (logs in /r/cable/fq_codel)",
		"cable/fq_codel: upload phase of run test discarded: vCPUs stalled",
		"vdsl/hotplug:cake: second pass; the first was inconclusive: host busy (no clean storm phase in 1 tries) (its files in /r/vdsl/hotplug-cake.busy)",
		"cable/cake: tune: download 39000 (98% of line 40000; 95% rule 38000) upload 7300 (91% of 8000; rule 7600), test time 151 s; boost seen 47000/0 kbit/s goodput",
		"cable/cake: sweep 80-100% (a direction ends after 3 passing steps in a row): best A+ download 38800, upload 7600 (one-way phases alone 39200/7600; 17 steps, 170 s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "download goodput") {
		t.Errorf("a passing check was printed:\n%s", out)
	}
	if strings.Contains(out, "inconclusive: inconclusive") {
		t.Errorf("an inconclusive error's status was printed twice:\n%s", out)
	}
	if i, j := strings.Index(out, "ext:htb-fifo"), strings.Index(out, "\ncable\n"); i > j {
		t.Errorf("adsl-atm's rows are not in one table:\n%s", out)
	}
}

// TestUpdateResults: a run's tables replace its kernel's between that
// kernel's markers, another kernel's stay, and a kernel without markers
// gets its own section at the end.
func TestUpdateResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.md")
	b61, e61 := resultsMarkers("6.1")
	b7, e7 := resultsMarkers("7")
	body := "# x\n\n## Results\n" + b61 + "\nold table\n" + e61 + "\n" + b7 + "\nseven's table\n" + e7 + "\n\n## Limits\n"
	os.WriteFile(path, []byte(body), 0o644)
	rs := []result{{Profile: "cable", Backend: "cake", Status: "pass", Date: "2026-11-23T10:00:00Z", Commit: "abc1234", Kernel: "6.1.0-56-amd64",
		Test: &accept.Measurement{Grade: "A+", Phases: []accept.Phase{{Name: accept.Download, AddedMedian: 1.2, AddedP95: 3.4, DownMbps: 36.1},
			{Name: accept.Upload, UpMbps: 7.2}}}}}
	if err := updateResults(path, seriesOf(rs[0].Kernel), rs); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"Lab run of 2026-11-23, commit abc1234, guest kernel 6.1.0-56-amd64", "**cable**", "| cake | pass | A+ | 1.2 / 3.4 |", "## Limits", "# x", "seven's table"} {
		if !strings.Contains(got, want) {
			t.Errorf("the results lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") {
		t.Errorf("old table kept:\n%s", got)
	}
	os.WriteFile(path, []byte("# no markers\n"), 0o644)
	rs[0].Kernel = "6.12.117+deb13-amd64"
	if err := updateResults(path, seriesOf(rs[0].Kernel), rs); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if got := string(b); !strings.Contains(got, "### Guest kernel 6.12\n") || !strings.Contains(got, "guest kernel 6.12.117+deb13-amd64") {
		t.Errorf("a kernel without markers got no section:\n%s", got)
	}
}

// TestReadRuns: runs of one kernel (a profile each) make one section; a
// run of another kernel among them is refused, naming both.
func TestReadRuns(t *testing.T) {
	run := func(kernel, profile string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`[{"profile":"`+profile+`","backend":"cake","status":"pass","date":"2026-11-29T10:00:00Z","commit":"abc1234","kernel":"`+kernel+`"}]`), 0o644)
		return dir
	}
	a, b, c := run("6.12.57+deb13-amd64", "cable"), run("6.12.57+deb13-amd64", "fiber"), run("7.2.13+deb14-amd64", "cable")
	rs, series, err := readRuns([]string{a, b})
	if err != nil || series != "6.12" || len(rs) != 2 || rs[1].Profile != "fiber" {
		t.Errorf("two 6.12 runs: %v %q %+v", err, series, rs)
	}
	if _, _, err := readRuns([]string{a, c}); err == nil || !strings.Contains(err.Error(), c) || !strings.Contains(err.Error(), "kernel 6.12") {
		t.Errorf("6.12 and 7 together: %v, want an error naming both", err)
	}
	if _, _, err := readRuns([]string{t.TempDir()}); err == nil {
		t.Error("a directory without summary.json was read")
	}
	if got := markdown(rs); !strings.HasPrefix(got, "Lab run of 2026-11-29, commit abc1234, guest kernel 6.12.57+deb13-amd64") {
		t.Errorf("one day's runs: %q", got)
	}
	// the kernel tests' row names no kernel: the run's kernel is still the one
	if got := markdown(append(rs, result{Profile: "kernel", Backend: "TestLab", Date: rs[0].Date, Commit: "abc1234"})); !strings.HasPrefix(got, "Lab run of 2026-11-29, commit abc1234, guest kernel 6.12.57+deb13-amd64 (") {
		t.Errorf("with the kernel tests: %q", got)
	}
	rs[1].Date, rs[1].Commit = "2026-11-30T01:00:00Z", "def5678"
	if got := markdown(rs); !strings.HasPrefix(got, "Lab runs of 2026-11-29, 2026-11-30, commit abc1234, def5678,") {
		t.Errorf("two days' runs: %q", got)
	}
}

func TestSeriesOf(t *testing.T) {
	for rel, want := range map[string]string{"6.1.0-56-amd64": "6.1", "6.12.117+deb13-amd64": "6.12", "7.2.13+deb14-amd64": "7", "7.3.4+bpo-amd64": "7", "": ""} {
		if got := seriesOf(rel); got != want {
			t.Errorf("seriesOf(%q) = %q, want %q", rel, got, want)
		}
	}
}

// TestTraceTable: a trace's controllers are one table, with its kind and
// the bounds every controller got; a run without figures says why.
func TestTraceTable(t *testing.T) {
	x := &traced{Trace: "Verizon-LTE-short", Kind: "recorded (mahimahi)", Controller: "sqmkit", Utilisation: [2]float64{0.61, 0.55}, MovedMB: [2]float64{50.5, 48.2},
		P50: [2]float64{3, 2}, P95: [2]float64{40, 30}, P99: [2]float64{90, 70}, Over30s: [2]float64{8, 5}, CPUPerHour: 12.5, Floor: [2]int{1332, 2292}, Base: [2]int{4260, 5652}, Ceiling: [2]int{9696, 10596}}
	var b strings.Builder
	ok := traceTable(&b, "cable-Verizon-LTE-short", []result{{Backend: "sqmkit", Trace: x}, {Backend: "ext:cake-autorate", Status: "fail", Error: "refused"}})
	got := b.String()
	for _, want := range []string{"recorded (mahimahi); every controller between 1332/2292 and 9696/10596 kbit/s, from 4260/5652",
		"| sqmkit | 0.61 / 0.55 | 50.5 + 48.2 | 3.0 / 40.0 / 90.0 | 2.0 / 30.0 / 70.0 | 8 / 5 | 12.5 |", "| ext:cake-autorate | fail: refused |"} {
		if !ok || !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if traceTable(&b, "cable", []result{{Backend: "cake"}}) {
		t.Error("a graded profile read as a trace")
	}
}
