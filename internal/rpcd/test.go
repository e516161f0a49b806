package rpcd

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// keepResults is how many finished tests the test page lists.
const keepResults = 5

// testStart runs `sqmkit test` against server in the background, its
// result kept under the job's results/.
func (e *Env) testStart(args map[string]any) (any, error) {
	server, err := serverArg(args)
	if err != nil {
		return nil, err
	}
	token, err := str(args, "token")
	if err != nil {
		return nil, err
	}
	j := e.job("test")
	now := e.Now().UTC()
	out, err := j.newResult(now)
	if err != nil {
		return nil, err
	}
	// the server after --: never read as a flag, whatever it holds; none
	// is the default server (bbproto.DefaultServer)
	// the router's queues under e.Root, as tune's: the route check, the
	// queue's test_server and its job lock are that router's
	cmd := []string{"test", "--root", e.Root, "--json", out}
	if server != "" {
		cmd = append(cmd, "--", server)
	}
	if err := j.start(e.Exe, cmd, tokenEnv(token), meta{Started: now, Server: server, Out: out}); err != nil {
		return nil, err
	}
	j.prune()
	return map[string]any{"started": true, "id": strings.TrimSuffix(filepath.Base(out), ".json")}, nil
}

// newResult reserves the file of a test started at now: its id is the
// time and a sequence number, taken by creating the file new, so tests
// started in one second never share one (TestTestIDsUnique); ids sort as
// they started.
func (j job) newResult(now time.Time) (string, error) {
	dir := filepath.Join(j.dir, "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for n := 0; n < 100; n++ {
		out := filepath.Join(dir, fmt.Sprintf("%s-%02d.json", now.Format("20060102-150405"), n))
		f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
		if err == nil {
			return out, f.Close()
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("a hundred tests started within one second; wait a second")
}

// serverArg is a call's server: "" for the default one, else a config
// URL or HOST[:PORT] (bbproto.CheckTarget).
func serverArg(args map[string]any) (string, error) {
	server, err := str(args, "server")
	if err != nil {
		return "", err
	}
	if server != "" {
		if err := bbproto.CheckTarget(server); err != nil {
			return "", fmt.Errorf("server: %w (or leave it empty for the queue's test_server, else the public responsiveness server)", err)
		}
	}
	return server, nil
}

// defaultServer is what a test or tune of queue section ("": the first)
// measures against when the call names no server. A config that cannot
// be read has no default: the caller's state fails with its error.
func (e *Env) defaultServer(section string) string {
	ts, _, err := e.queues()
	if err != nil {
		return ""
	}
	for _, t := range ts {
		if section == "" || t.Queue.Section == section {
			return bbproto.DefaultServer(t.Queue.TestServer)
		}
	}
	return bbproto.DefaultServer("")
}

// prune keeps the newest keepResults results (and the one being written).
func (j job) prune() {
	names, _ := filepath.Glob(filepath.Join(j.dir, "results", "*.json"))
	slices.Sort(names)
	for len(names) > keepResults+1 {
		os.Remove(names[0])
		names = names[1:]
	}
}

// testSummary is one kept result as the page lists it.
type testSummary struct {
	ID      string          `json:"id"`
	Started string          `json:"started"`
	Server  string          `json:"server"`
	Grade   string          `json:"grade"`
	Grades  bbresult.Grades `json:"grades"`
	Phases  []phaseSummary  `json:"phases"`
	Error   string          `json:"incomplete,omitempty"`
	Notes   []string        `json:"notes"`
}

type phaseSummary struct {
	Name         string  `json:"name"`
	AddedMedian  float64 `json:"added_median_ms"`
	AddedP95     float64 `json:"added_p95_ms"`
	DownloadMbps float64 `json:"download_mbps"`
	UploadMbps   float64 `json:"upload_mbps"`
	Grade        string  `json:"grade,omitempty"`
}

// testState is whether a test runs, its progress, and the kept results,
// newest first.
func (e *Env) testState(map[string]any) (any, error) {
	if err := e.readable(); err != nil {
		return nil, err
	}
	j := e.job("test")
	names, _ := filepath.Glob(filepath.Join(j.dir, "results", "*.json"))
	slices.Sort(names)
	slices.Reverse(names)
	results := []testSummary{}
	for _, n := range names {
		var r bbresult.Result
		if err := readJSON(n, &r); err != nil {
			continue // the running test's file, not written yet
		}
		s := testSummary{ID: strings.TrimSuffix(filepath.Base(n), ".json"), Started: r.Started.Format("2006-01-02 15:04:05 MST"),
			Server: r.Server, Grade: r.Grades.DSLReports, Grades: r.Grades, Phases: []phaseSummary{}, Error: r.Incomplete, Notes: append([]string{}, r.Notes...)}
		for _, p := range r.Phases {
			s.Phases = append(s.Phases, phaseSummary{p.Name, fixed(p.AddedMedian), fixed(p.AddedP95), fixed(p.DownloadMbps), fixed(p.UploadMbps), p.Grade})
		}
		results = append(results, s)
	}
	var m meta
	j.read("meta.json", &m)
	return map[string]any{"running": j.running(), "server": m.Server, "default_server": e.defaultServer(""), "log": j.lines(20), "results": results}, nil
}

// fixed rounds to a tenth, as the page prints it.
func fixed(v float64) float64 { return math.Round(v*10) / 10 }

// maxPoints caps each series of a chart: a 90 s test has 9000 probes,
// more than a chart's width and more than ubus carries in one message.
const maxPoints = 600

// testResult is one kept result for the chart: its phases and its
// samples, each series thinned to maxPoints.
func (e *Env) testResult(args map[string]any) (any, error) {
	id, err := str(args, "id")
	if err != nil {
		return nil, err
	}
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, fmt.Errorf("id %q: want one of the ids test_state lists", id)
	}
	var r bbresult.Result
	if err := readJSON(filepath.Join(e.job("test").dir, "results", id+".json"), &r); err != nil {
		return nil, err
	}
	var rtt, down, up [][2]float64
	for _, p := range r.Samples.Probes {
		if p.Lost == "" {
			rtt = append(rtt, [2]float64{fixed(p.T), math.Round(p.RTT*100) / 100})
		}
	}
	for _, s := range r.Samples.Throughput {
		down = append(down, [2]float64{fixed(s.T), fixed(s.Download)})
		up = append(up, [2]float64{fixed(s.T), fixed(s.Upload)})
	}
	phases := []map[string]any{}
	for _, p := range r.Phases {
		phases = append(phases, map[string]any{"name": p.Name, "start_s": p.Start, "end_s": p.End})
	}
	return map[string]any{"id": id, "server": r.Server, "grade": r.Grades.DSLReports, "idle_rtt_ms": fixed(r.IdleRTT), "phases": phases,
		"rtt_ms": thin(rtt), "download_mbps": thin(down), "upload_mbps": thin(up), "incomplete": r.Incomplete}, nil
}

// thin keeps at most maxPoints of xy: the largest of each run of
// neighbours, so a spike the eye should see is kept.
func thin(xy [][2]float64) [][2]float64 {
	if len(xy) <= maxPoints {
		return append([][2]float64{}, xy...) // [], never null: a result without samples has empty series
	}
	per := (len(xy) + maxPoints - 1) / maxPoints
	out := make([][2]float64, 0, maxPoints)
	for i := 0; i < len(xy); i += per {
		best := xy[i]
		for _, p := range xy[i:min(i+per, len(xy))] {
			if p[1] > best[1] {
				best = p
			}
		}
		out = append(out, best)
	}
	return out
}
