// Package reporttest builds synthetic bufferbloat results for tests of the
// report, plot and flent packages, so each test can state the run it expects
// (idle RTT, bloat per phase, rates) instead of depending on a live network,
// and opens the files those packages write.
package reporttest

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// Phase describes one phase of a synthetic run.
type Phase struct {
	Name         string
	Seconds      float64
	DownloadMbps float64
	UploadMbps   float64
	AddedUp      float64 // ms of queueing on the client→server leg
	AddedDown    float64 // ms of queueing on the server→client leg
}

// Spec describes a synthetic run; Phases run back to back from t=0.
type Spec struct {
	IdleRTT  float64 // ms, split evenly between the two legs
	Jitter   float64 // ms, uniform noise added to each leg
	LossRate float64 // fraction of probes lost during loaded phases, half on each leg
	Phases   []Phase
	Seed     uint64
}

// Bloated is a run over a 100/20 Mbit/s line without SQM: the download
// queue adds about 250 ms, the upload queue about 80 ms.
func Bloated() Spec {
	return Spec{
		IdleRTT: 20, Jitter: 2, LossRate: 0.01, Seed: 1,
		Phases: []Phase{
			{Name: bbresult.PhaseIdleBefore, Seconds: 5},
			{Name: bbresult.PhaseDownload, Seconds: 10, DownloadMbps: 94, UploadMbps: 0.4, AddedDown: 250},
			{Name: bbresult.PhaseUpload, Seconds: 10, DownloadMbps: 0.5, UploadMbps: 18.5, AddedUp: 80},
			{Name: bbresult.PhaseBidir, Seconds: 10, DownloadMbps: 88, UploadMbps: 17, AddedUp: 90, AddedDown: 240},
			{Name: bbresult.PhaseIdleAfter, Seconds: 5},
		},
	}
}

// Shaped is the same line with SQM at 95% of the rates: a few ms of added
// latency and slightly lower goodput.
func Shaped() Spec {
	return Spec{
		IdleRTT: 20, Jitter: 1, Seed: 2,
		Phases: []Phase{
			{Name: bbresult.PhaseIdleBefore, Seconds: 5},
			{Name: bbresult.PhaseDownload, Seconds: 10, DownloadMbps: 89, UploadMbps: 0.4, AddedDown: 4},
			{Name: bbresult.PhaseUpload, Seconds: 10, DownloadMbps: 0.5, UploadMbps: 17.6, AddedUp: 6},
			{Name: bbresult.PhaseBidir, Seconds: 10, DownloadMbps: 84, UploadMbps: 16.5, AddedUp: 7, AddedDown: 5},
			{Name: bbresult.PhaseIdleAfter, Seconds: 5},
		},
	}
}

const (
	probeInterval      = 0.010 // s
	throughputInterval = 0.100 // s
	inflowInterval     = 0.250 // s per direction
)

// Result generates every sample of the run and the summary the way a real
// run reports it, with the grades computed from that summary.
func Result(s Spec) *bbresult.Result {
	rng := rand.New(rand.NewPCG(s.Seed, 42))
	noise := func() float64 { return rng.Float64() * s.Jitter }
	r := &bbresult.Result{
		SchemaVersion: bbresult.SchemaVersion,
		Tool:          "sqmkit v0.1.0",
		Started:       time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		Server:        "bb.example.net",
		ServerAddr:    "[2001:db8::10]:7070",
		Family:        "ipv6",
		Streams:       4,
		ProbeInterval: probeInterval * 1000,
		Grades:        bbresult.Grades{Basis: "udp_probes"},
	}
	var seq uint32
	start := 0.0
	for _, p := range s.Phases {
		end := start + p.Seconds
		ph := bbresult.Phase{Name: p.Name, Start: start, End: end, DownloadMbps: p.DownloadMbps, UploadMbps: p.UploadMbps}
		loaded := p.DownloadMbps > 1 || p.UploadMbps > 1
		var rtts, ups, downs, inflow []float64
		for t := start; t < end-1e-9; t += probeInterval {
			seq++
			ph.ProbesSent++
			pr := bbresult.Probe{T: t, Seq: seq}
			if loaded && rng.Float64() < s.LossRate {
				if rng.IntN(2) == 0 {
					pr.Lost = "up"
					ph.LostUp++
				} else {
					pr.Lost = "down"
					ph.LostDown++
				}
			} else {
				// Queues fill over the first second of a phase.
				ramp := math.Min(1, (t-start)/1)
				pr.Up = s.IdleRTT/2 + noise() + ramp*p.AddedUp*(0.8+0.4*rng.Float64())
				pr.Down = s.IdleRTT/2 + noise() + ramp*p.AddedDown*(0.8+0.4*rng.Float64())
				pr.RTT = pr.Up + pr.Down
				rtts = append(rtts, pr.RTT)
				ups = append(ups, pr.Up-s.IdleRTT/2)
				downs = append(downs, pr.Down-s.IdleRTT/2)
			}
			r.Samples.Probes = append(r.Samples.Probes, pr)
		}
		for t := start + throughputInterval; t <= end+1e-9; t += throughputInterval {
			tp := bbresult.Throughput{
				T:        t,
				Download: p.DownloadMbps * (0.9 + 0.2*rng.Float64()),
				Upload:   p.UploadMbps * (0.9 + 0.2*rng.Float64()),
			}
			tp.DownloadStreams = split(tp.Download, r.Streams, rng)
			tp.UploadStreams = split(tp.Upload, r.Streams, rng)
			r.Samples.Throughput = append(r.Samples.Throughput, tp)
		}
		for t := start + inflowInterval; loaded && t < end; t += inflowInterval {
			// In-flow requests wait behind the stream's own queue, on
			// both legs, so they see the full bloat even under fq_codel.
			for _, dir := range []string{"down", "up"} {
				if (dir == "down" && p.DownloadMbps < 1) || (dir == "up" && p.UploadMbps < 1) {
					continue
				}
				v := s.IdleRTT + noise() + p.AddedUp + p.AddedDown + 10
				inflow = append(inflow, v)
				r.Samples.InFlow = append(r.Samples.InFlow, bbresult.InFlow{T: t, Dir: dir, RTT: v})
			}
		}
		ph.Latency = stats(rtts)
		ph.InFlow = stats(inflow)
		ph.AddedUp = stats(ups).Median
		ph.AddedDown = stats(downs).Median
		r.Phases = append(r.Phases, ph)
		start = end
	}
	finish(r)
	return r
}

// finish derives the idle baseline, added latencies and grades.
func finish(r *bbresult.Result) {
	var idle []float64
	for _, pr := range r.Samples.Probes {
		if pr.Lost == "" && isIdle(r.Phases, pr.T) {
			idle = append(idle, pr.RTT)
		}
	}
	base := stats(idle)
	r.IdleRTT = base.Median
	var dl, ul, worst float64
	for i := range r.Phases {
		ph := &r.Phases[i]
		if ph.Name == bbresult.PhaseIdleBefore || ph.Name == bbresult.PhaseIdleAfter {
			continue
		}
		ph.AddedMean = ph.Latency.Mean - base.Mean
		ph.AddedMedian = ph.Latency.Median - base.Median
		ph.AddedP95 = ph.Latency.P95 - base.Median
		ph.AddedP99 = ph.Latency.P99 - base.Median
		ph.Grade = bbresult.Grade(ph.AddedMean)
		worst = math.Max(worst, ph.AddedP95)
		switch ph.Name {
		case bbresult.PhaseDownload:
			dl = ph.AddedMean
		case bbresult.PhaseUpload:
			ul = ph.AddedMean
		}
	}
	r.Grades.DSLReportsAddedMs = (dl + ul) / 2
	r.Grades.DSLReports = bbresult.Grade(r.Grades.DSLReportsAddedMs)
	r.Grades.PercentileAddedMs = worst
	r.Grades.Percentile = bbresult.Grade(worst)
}

func isIdle(phases []bbresult.Phase, t float64) bool {
	for _, p := range phases {
		if t >= p.Start && t < p.End {
			return p.Name == bbresult.PhaseIdleBefore || p.Name == bbresult.PhaseIdleAfter
		}
	}
	return false
}

func stats(v []float64) bbresult.Stats {
	if len(v) == 0 {
		return bbresult.Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 { return s[int(math.Ceil(p*float64(len(s))))-1] }
	var sum float64
	for _, x := range s {
		sum += x
	}
	return bbresult.Stats{N: len(s), Min: s[0], Median: q(0.5), Mean: sum / float64(len(s)),
		P90: q(0.9), P95: q(0.95), P99: q(0.99)}
}

// split divides a direction's total among n streams unevenly, as competing
// TCP flows share a link; nil when the direction is idle, as bbclient records.
func split(total float64, n int, rng *rand.Rand) []float64 {
	if total == 0 {
		return nil
	}
	v := make([]float64, n)
	var sum float64
	for i := range v {
		v[i] = float64(i+1) + rng.Float64()
		sum += v[i]
	}
	for i := range v {
		v[i] *= total / sum
	}
	return v
}

// Open opens path for reading, failing the test when it cannot, and closes
// it when the test ends.
func Open(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
