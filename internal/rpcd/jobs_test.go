package rpcd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/config"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
)

// fakeSqmkit is an executable that stands in for `sqmkit test` and
// `sqmkit tune`: it prints progress lines to stderr, waits until the file
// go appears (the test lets it finish), and copies fixture to its --json.
func fakeSqmkit(t *testing.T, fixture any) (exe, goFile string) {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(fixture)
	os.WriteFile(filepath.Join(dir, "fixture.json"), b, 0o644)
	goFile = filepath.Join(dir, "go")
	script := fmt.Sprintf(`#!/bin/sh
printf '%%s\n' "$@" >"$(dirname "$0")/args"
out=
while [ $# -gt 0 ]; do [ "$1" = --json ] && out=$2; shift; done
echo "sqmkit $0: download: measuring the line (shaper open)" >&2
echo "sqmkit $0: download at 19000 kbit/s (95%% of line): +1.2/+3.4 ms, 18000 kbit/s goodput: meets A+" >&2
i=0
while [ ! -e %q ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
cp %q "$out"
`, goFile, filepath.Join(dir, "fixture.json"))
	exe = filepath.Join(dir, "sqmkit")
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, goFile
}

// argsOf is what the fake sqmkit at exe was last run with.
func argsOf(t *testing.T, exe string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestDefaultServerCalls: a test or tune the page starts without a server
// runs with none (test) or an empty --server= (tune): sqmkit picks the
// queue's test_server, else the public server, which the state names;
// a URL is passed after --; a server that is no URL and no HOST[:PORT]
// is refused with the way out.
func TestDefaultServerCalls(t *testing.T) {
	e, _ := router(t)
	exe, release := fakeSqmkit(t, bbresult.Result{})
	os.WriteFile(release, nil, 0o644)
	e.Exe = exe
	const url = "https://mensura.cdn-apple.com/api/v1/gm/config"
	for _, c := range []struct {
		method, args string
		want         []string // the argv's tail
	}{
		{"test_start", `{}`, []string{"test", "--root", e.Root, "--json", "*"}},
		{"test_start", `{"server": "` + url + `"}`, []string{"--", url}},
		{"tune_start", `{"budget": 140}`, []string{"--server=", "--", "wan"}},
		{"tune_start", `{"server": "` + url + `", "budget": 140}`, []string{"--", url, "wan"}},
	} {
		if got := call(t, e, c.method, c.args); got["started"] != true {
			t.Fatalf("%s %s: %v", c.method, c.args, got)
		}
		waitDone(t, e.job(strings.TrimSuffix(c.method, "_start")))
		args := argsOf(t, exe)
		tail := args[max(len(args)-len(c.want), 0):]
		for i, w := range c.want {
			if w != "*" && tail[i] != w {
				t.Errorf("%s %s ran %q, want it to end %q", c.method, c.args, args, c.want)
				break
			}
		}
	}
	for _, m := range []string{"test_state", "tune_state"} {
		if st := call(t, e, m, ""); st["default_server"] != url {
			t.Errorf("%s: default_server %v, want %s", m, st["default_server"], url)
		}
	}
	for _, bad := range []string{"-x", "https://h/<script>", "file:///etc/passwd"} {
		if got := call(t, e, "test_start", fmt.Sprintf(`{"server": %q}`, bad)); !strings.Contains(fmt.Sprint(got["error"]), "leave it empty") {
			t.Errorf("server %q: %v", bad, got)
		}
	}
	for _, bad := range []string{`{"target": 1, "budget": 140}`, `{"target": ["A"], "budget": 140}`} {
		if got := call(t, e, "tune_start", bad); !strings.Contains(fmt.Sprint(got["error"]), "argument target: want a string") {
			t.Errorf("tune_start %s: %v", bad, got)
		}
	}
}

// waitDone waits until the job no longer runs.
func waitDone(t *testing.T, j job) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !j.running() {
			return
		}
	}
	t.Fatalf("%s still runs", j.name)
}

// TestJobRefusesSecondStart and the test page's round: a test runs in the
// background, a second start is refused while it runs, its progress and
// then its result show in test_state (kept results, newest first), and
// test_result gives the chart its series.
func TestJobRefusesSecondStart(t *testing.T) {
	e, _ := router(t)
	res := bbresult.Result{Server: "vps.example", Started: e.Now(), Grades: bbresult.Grades{DSLReports: "A+"},
		Phases: []bbresult.Phase{{Name: "download", Start: 1, End: 31, AddedMedian: 1.23, AddedP95: 3.45, DownloadMbps: 18.04, Grade: "A+"}}}
	for i := range 2000 {
		res.Samples.Probes = append(res.Samples.Probes, bbresult.Probe{T: float64(i) / 100, RTT: 20 + float64(i%7)})
	}
	res.Samples.Throughput = []bbresult.Throughput{{T: 1.1, Download: 17.9}, {T: 1.2, Download: 18.1}}
	exe, release := fakeSqmkit(t, res)
	e.Exe = exe
	if got := call(t, e, "test_start", `{"server": "vps.example:8693"}`); got["started"] != true {
		t.Fatalf("test_start: %v", got)
	}
	if got := call(t, e, "test_start", `{"server": "vps.example:8693"}`); !strings.Contains(fmt.Sprint(got["error"]), "a test is running since") {
		t.Errorf("second start: %v", got)
	}
	if st := call(t, e, "status", ""); st["jobs"].(map[string]any)["test"] != true {
		t.Errorf("status does not say a test runs: %v", st["jobs"])
	}
	deadline := time.Now().Add(5 * time.Second)
	for st := call(t, e, "test_state", ""); len(st["log"].([]any)) < 2; st = call(t, e, "test_state", "") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.WriteFile(release, nil, 0o644)
	waitDone(t, e.job("test"))
	st := call(t, e, "test_state", "")
	results := st["results"].([]any)
	if st["running"] != false || len(results) != 1 {
		t.Fatalf("after the test: %v", st)
	}
	r := results[0].(map[string]any)
	p := r["phases"].([]any)[0].(map[string]any)
	if r["grade"] != "A+" || r["server"] != "vps.example" || p["added_median_ms"] != 1.2 || p["download_mbps"] != 18.0 {
		t.Errorf("result summary %v", r)
	}
	chart := call(t, e, "test_result", fmt.Sprintf(`{"id": %q}`, r["id"]))
	if n := len(chart["rtt_ms"].([]any)); n > maxPoints || n < maxPoints/2 || len(chart["download_mbps"].([]any)) != 2 {
		t.Errorf("chart: %d RTT points, %d goodput", n, len(chart["download_mbps"].([]any)))
	}
	// a finished job's lock is stale: a new test starts
	if got := call(t, e, "test_start", `{"server": "vps.example"}`); got["started"] != true {
		t.Errorf("a start after the test ended: %v", got)
	}
	// it writes its result under the test's root: done before that root
	// is removed (a loaded host had it still writing: make harsh)
	waitDone(t, e.job("test"))
}

// TestTuneRound: a tune runs in the background, its progress shows step
// by step, its outcome stands beside the configured rates; Write puts the
// found rates in the config and the kernel, Undo puts the old ones back.
func TestTuneRound(t *testing.T) {
	e, k := router(t)
	o := tune.Outcome{Search: &search.Result{Download: search.Choice{RateKbit: 18500, Why: "the highest rate meeting A+"},
		Upload: search.Choice{RateKbit: 9200}}, Confirm: &bbresult.Result{Grades: bbresult.Grades{DSLReports: "A+"}}, Spent: 150 * time.Second}
	exe, release := fakeSqmkit(t, o)
	e.Exe = exe
	if got := call(t, e, "tune_start", `{"server": "vps.example", "budget": 140}`); got["started"] != true || got["section"] != "wan" {
		t.Fatalf("tune_start: %v", got)
	}
	if got := call(t, e, "tune_start", `{"server": "vps.example"}`); !strings.Contains(fmt.Sprint(got["error"]), "a tune is running") {
		t.Errorf("second start: %v", got)
	}
	if got := call(t, e, "tune_write", `{}`); !strings.Contains(fmt.Sprint(got["error"]), "still running") {
		t.Errorf("write while running: %v", got)
	}
	os.WriteFile(release, nil, 0o644)
	waitDone(t, e.job("tune"))
	st := call(t, e, "tune_state", "")
	out := st["outcome"].(map[string]any)
	if len(st["progress"].([]any)) != 2 || out["writable"] != true || out["confirm_grade"] != "A+" ||
		fmt.Sprint(out["found"]) != "map[download_kbit:18500 upload_kbit:9200]" || fmt.Sprint(out["current"]) != "map[download_kbit:20000 upload_kbit:10000]" {
		t.Fatalf("tune_state %v", st)
	}
	if got := call(t, e, "tune_write", `{}`); got["section"] != "wan" {
		t.Fatalf("tune_write: %v", got)
	}
	if r := configRates(t, e); r != (config.Rates{Download: 18500, Upload: 9200}) {
		t.Errorf("config after write: %+v", r)
	}
	if snap, _ := k.Read("ifb4wan"); fmt.Sprint(snap.Root("ifb4wan").Options) == "" || !strings.Contains(fmt.Sprint(snap.Root("ifb4wan").Lines), "18500") {
		t.Errorf("kernel after write: %v", snap.Root("ifb4wan").Lines)
	}
	if st := call(t, e, "tune_state", ""); st["undo"] != true || st["outcome"].(map[string]any)["writable"] != false {
		t.Errorf("after write: %v", st)
	}
	if got := call(t, e, "tune_undo", `{}`); fmt.Sprint(got["restored"]) != "map[download_kbit:20000 upload_kbit:10000]" {
		t.Fatalf("tune_undo: %v", got)
	}
	if r := configRates(t, e); r != (config.Rates{Download: 20000, Upload: 10000}) {
		t.Errorf("config after undo: %+v", r)
	}
}

// TestTuneFailedOutcome: a tune that died without its JSON, or ended with
// an error, reads as that, with the reason and no rates to write, never as
// "found 0 kbit/s".
func TestTuneFailedOutcome(t *testing.T) {
	e, _ := router(t)
	dir := e.job("tune").dir
	out := filepath.Join(dir, "out.json")
	b, _ := json.Marshal(meta{Started: e.Now(), Server: "vps.example", Section: "wan", Out: out})
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "meta.json"), b, 0o644)
	for _, c := range []struct {
		name, json, want string
	}{
		{"killed", "", "ended without a result"},
		{"error", `{"error": "the server refused: rate limit"}`, "rate limit"},
		{"no search", `{}`, "without rates"},
	} {
		os.Remove(out)
		if c.json != "" {
			os.WriteFile(out, []byte(c.json), 0o644)
		}
		st := call(t, e, "tune_state", "")
		o, ok := st["outcome"].(map[string]any)
		if !ok || !strings.Contains(fmt.Sprint(o["error"]), c.want) || o["writable"] != false {
			t.Errorf("%s: outcome %v", c.name, st["outcome"])
		}
		if got := call(t, e, "tune_write", `{}`); got["error"] == nil {
			t.Errorf("%s: write allowed: %v", c.name, got)
		}
	}
}

// TestJobStartsOnce: of ten test_start (or tune_start) calls at once,
// exactly one starts a job; the others are refused, none deletes the
// running job's lock (it is taken with its owner in one step).
func TestJobStartsOnce(t *testing.T) {
	for _, kind := range []string{"test", "tune"} {
		t.Run(kind, func(t *testing.T) {
			e, _ := router(t)
			exe, release := fakeSqmkit(t, map[string]any{})
			e.Exe = exe
			defer func() { os.WriteFile(release, nil, 0o644); waitDone(t, e.job(kind)) }()
			var wg sync.WaitGroup
			var mu sync.Mutex
			started := 0
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := map[string]string{"test": `{"server": "vps.example"}`, "tune": `{"server": "vps.example", "budget": 140}`}[kind]
					got := call(t, e, kind+"_start", args)
					mu.Lock()
					defer mu.Unlock()
					if got["started"] == true {
						started++
					} else if !strings.Contains(fmt.Sprint(got["error"]), "is running since") {
						t.Errorf("a refused start says %v", got)
					}
				}()
			}
			wg.Wait()
			if started != 1 {
				t.Errorf("%d %ss started, want 1", started, kind)
			}
			if !e.job(kind).running() {
				t.Error("the job does not run")
			}
		})
	}
}

// TestTestIDsUnique: tests started within one second keep a result each.
func TestTestIDsUnique(t *testing.T) {
	e, _ := router(t)
	exe, release := fakeSqmkit(t, bbresult.Result{Server: "vps.example", Started: e.Now()})
	os.WriteFile(release, nil, 0o644)
	e.Exe = exe
	ids := map[any]bool{}
	for range 3 {
		got := call(t, e, "test_start", `{"server": "vps.example"}`)
		if got["started"] != true {
			t.Fatalf("test_start: %v", got)
		}
		ids[got["id"]] = true
		waitDone(t, e.job("test"))
	}
	if results := call(t, e, "test_state", "")["results"].([]any); len(ids) != 3 || len(results) != 3 {
		t.Errorf("three starts in one second: ids %v, %d results kept", ids, len(results))
	}
}
