package bbclient

import (
	"cmp"
	"slices"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// RTTProbe is one round trip measured over a protocol that gives no
// one-way split: a responsiveness server's TCP handshakes.
type RTTProbe struct {
	T    time.Duration // sent, since the test's start
	RTT  time.Duration
	Lost bool
}

// RTTPhase is one phase as run: its window since the start, the payload
// bytes moved each way, and whether it was loaded (graded).
type RTTPhase struct {
	Name       string
	Start, End time.Duration
	Down, Up   int64
	Loaded     bool
}

// RTTRun is what a test over another protocol collected (package rpm's
// phases against a responsiveness server).
type RTTRun struct {
	Probes     []RTTProbe
	Phases     []RTTPhase
	Throughput []bbresult.Throughput
	InFlow     []bbresult.InFlow
	Notes      []string
	// Why is what the client knows of each direction's load (download,
	// upload): the reason a phase whose load never flowed gives.
	Why [2]string
}

// AnalyzeRTT fills res's phases, grades, samples and notes from run as Run
// does from its own measurements, with the same baseline and bars, from
// round trips only (res.RTTOnly).
func AnalyzeRTT(res *bbresult.Result, run RTTRun) {
	res.RTTOnly = true
	rw := &raw{rttOnly: true, serverSaw: func(uint32) bool { return false },
		throughput: run.Throughput, inflow: run.InFlow, notes: run.Notes, why: run.Why}
	probes := slices.SortedStableFunc(slices.Values(run.Probes), func(a, b RTTProbe) int { return cmp.Compare(a.T, b.T) })
	for i, p := range probes {
		r := record{seq: uint32(i), sent: int64(p.T)}
		if !p.Lost {
			r.recv = r.sent + max(int64(p.RTT), 1)
		}
		rw.probes = append(rw.probes, r)
	}
	for _, p := range run.Phases {
		rw.spans = append(rw.spans, span{name: p.Name, start: p.Start.Seconds(), end: p.End.Seconds(), down: p.Down, up: p.Up, loaded: p.Loaded})
	}
	analyze(rw, res)
}

// Phases are cfg's phases in order with their lengths, for a test over
// another protocol: the same phases as Run's.
func (cfg Config) Phases() []RTTPhase {
	var out []RTTPhase
	for _, p := range cfg.phases() {
		if p.end > 0 {
			out = append(out, RTTPhase{Name: p.name, End: time.Duration(p.end * float64(time.Second)), Loaded: p.loaded})
		}
	}
	return out
}
