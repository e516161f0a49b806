package bbclient

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestSummarize(t *testing.T) {
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[n-1-i] = float64(i + 1) // reversed: summarize must sort
		}
		return v
	}
	for _, c := range []struct {
		in   []float64
		want bbresult.Stats
	}{
		{nil, bbresult.Stats{}},
		{[]float64{3}, bbresult.Stats{N: 1, Min: 3, Median: 3, Mean: 3, P90: 3, P95: 3, P99: 3}},
		{[]float64{2, 1}, bbresult.Stats{N: 2, Min: 1, Median: 1.5, Mean: 1.5, P90: 1.9, P95: 1.95, P99: 1.99}},
		{seq(100), bbresult.Stats{N: 100, Min: 1, Median: 50.5, Mean: 50.5, P90: 90.1, P95: 95.05, P99: 99.01}},
	} {
		got := summarize(c.in)
		if got.N != c.want.N || !near(got.Min, c.want.Min, 1e-9) || !near(got.Median, c.want.Median, 1e-9) ||
			!near(got.Mean, c.want.Mean, 1e-9) || !near(got.P90, c.want.P90, 1e-9) ||
			!near(got.P95, c.want.P95, 1e-9) || !near(got.P99, c.want.P99, 1e-9) {
			t.Errorf("summarize(%d values) = %+v, want %+v", len(c.in), got, c.want)
		}
	}
}

func TestGrade(t *testing.T) {
	ph := func(name string, mean, p95 float64) bbresult.Phase {
		return bbresult.Phase{Name: name, AddedMean: mean, AddedP95: p95, Grade: bbresult.Grade(mean)}
	}
	idle := bbresult.Phase{Name: bbresult.PhaseIdleBefore, AddedP95: 999}
	for _, c := range []struct {
		name   string
		phases []bbresult.Phase
		dsl    string
		dslMs  float64
		pct    string
		pctMs  float64
	}{
		{"down+up averaged, bidir ignored by DSLReports", []bbresult.Phase{idle, ph("download", 10, 50), ph("upload", 70, 80), ph("bidirectional", 300, 450)}, "B", 40, "F", 450},
		{"upload only", []bbresult.Phase{idle, ph("upload", 3, 4)}, "A+", 3, "A+", 4},
		{"bidir only", []bbresult.Phase{ph("bidirectional", 100, 120)}, "C", 100, "C", 120},
		{"idle only", []bbresult.Phase{idle}, "", 0, "", 0},
	} {
		g := grade(c.phases)
		if g.DSLReports != c.dsl || !near(g.DSLReportsAddedMs, c.dslMs, 1e-9) || g.Percentile != c.pct || !near(g.PercentileAddedMs, c.pctMs, 1e-9) || g.Basis != "udp_probes" {
			t.Errorf("%s: got %+v", c.name, g)
		}
	}
}

// synth builds a run over a path whose true one-way delays are known: 5 ms
// each way when idle, a 40 ms queue downstream during the download phase
// and a 20 ms queue upstream during the upload phase. The server's clock
// is 3 s ahead and runs 50 ppm fast, which the analysis must take out.
func synth() *raw {
	const (
		wall0 = int64(1_700_000_000_000_000_000)
		ms    = int64(1e6)
	)
	spans := []span{
		{name: bbresult.PhaseIdleBefore, start: 0, end: 2},
		{name: bbresult.PhaseDownload, start: 2, end: 4, loaded: true, down: 2.5e6},
		{name: bbresult.PhaseUpload, start: 4, end: 6, loaded: true, up: 1.25e6},
		{name: bbresult.PhaseIdleAfter, start: 6, end: 8},
	}
	serverClock := func(client int64) int64 { return client + 3e9 + int64(float64(client-wall0)*50e-6) }
	lostUp := map[uint32]bool{}
	rw := &raw{wall0: wall0, spans: spans, serverSaw: func(s uint32) bool { return !lostUp[s] }}
	for i := 0; i < 800; i++ {
		sent := int64(i) * 10 * ms
		up, down := 5*ms, 5*ms
		switch {
		case sent >= 2e9 && sent < 4e9:
			down += 40 * ms
		case sent >= 4e9 && sent < 6e9:
			up += 20 * ms
		}
		seq := uint32(i)
		srvRecv := serverClock(wall0 + sent + up)
		r := record{seq: seq, sent: sent, srvRecv: srvRecv, srvSend: srvRecv + 20000}
		r.recv = sent + up + 20000 + down
		if sent >= 2e9 && sent < 4e9 {
			switch i % 50 {
			case 7:
				lostUp[seq] = true
				r = record{seq: seq, sent: sent}
			case 9:
				r = record{seq: seq, sent: sent}
			case 11:
				r.recv += 11 * ms // arrives after the next probe of its flow: reordered
			}
		}
		rw.probes = append(rw.probes, r)
	}
	rw.inflow = []bbresult.InFlow{{T: 2.5, Dir: "down", RTT: 300}, {T: 3, Dir: "down", RTT: 500}, {T: 7, Dir: "down", RTT: 1}}
	return rw
}

func TestAnalyze(t *testing.T) {
	var res bbresult.Result
	analyze(synth(), &res)
	if !near(res.IdleRTT, 10, 1e-3) {
		t.Errorf("IdleRTT %v, want 10", res.IdleRTT)
	}
	if len(res.Phases) != 4 || len(res.Samples.Probes) != 800 {
		t.Fatalf("%d phases, %d probes", len(res.Phases), len(res.Samples.Probes))
	}
	for _, c := range []struct {
		i                               int
		median, up, down, mbpsD, mbpsU  float64
		sent, lostUp, lostDown, reorder int
		grade                           string
	}{
		{0, 0, 0, 0, 0, 0, 200, 0, 0, 0, ""},
		// reordered: the four delayed probes, and the last of each loaded
		// phase, which the first of the next (its queue gone at once in
		// this synthetic path) overtakes
		{1, 40, 0, 40, 10, 0, 200, 4, 4, 5, "B"},
		{2, 20, 20, 0, 0, 5, 200, 0, 0, 1, "A"},
		{3, 0, 0, 0, 0, 0, 200, 0, 0, 0, ""},
	} {
		p := res.Phases[c.i]
		if !near(p.AddedMedian, c.median, 0.01) || !near(p.AddedUp, c.up, 0.01) || !near(p.AddedDown, c.down, 0.01) ||
			!near(p.DownloadMbps, c.mbpsD, 1e-9) || !near(p.UploadMbps, c.mbpsU, 1e-9) ||
			p.ProbesSent != c.sent || p.LostUp != c.lostUp || p.LostDown != c.lostDown || p.Reordered != c.reorder || p.Grade != c.grade {
			t.Errorf("phase %s: %+v", p.Name, p)
		}
	}
	if in := res.Phases[1].InFlow; in.N != 2 || in.Median != 400 {
		t.Errorf("download in-flow %+v, want 2 samples, median 400", in)
	}
	// One-way delays after the drift correction are the true ones.
	for _, p := range res.Samples.Probes {
		if p.Lost == "" && p.T >= 6 && (!near(p.Up, 5, 0.01) || !near(p.Down, 5, 0.01)) {
			t.Fatalf("probe %d at %.2fs: up %.3f down %.3f, want 5/5", p.Seq, p.T, p.Up, p.Down)
		}
	}
	if g := res.Grades; g.DSLReports != "B" || !near(g.DSLReportsAddedMs, 30, 0.5) || g.Percentile != "B" {
		t.Errorf("grades %+v", g)
	}
	all := strings.Join(res.Notes, "\n")
	for _, want := range []string{"download: 100% of the added delay is downstream", "upload: 0% of the added delay is downstream", "download: 4.0% of probes lost (4 up, 4 down)", "latency inside the TCP streams"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
}

// TestProbeFlows: probes go out on ProbeFlows flows in turn; one that
// waits 6 ms longer than the rest in the download phase (a hash collision
// with a bulk flow) is reported as such, and the figures keep it.
func TestProbeFlows(t *testing.T) {
	rw := synth()
	for i := range rw.probes {
		r := &rw.probes[i]
		r.flow = int(r.seq) % ProbeFlows
		if r.flow == 2 && r.sent >= 2e9 && r.sent < 4e9 && r.replied() {
			r.recv += 6e6
		}
	}
	var res bbresult.Result
	analyze(rw, &res)
	d := res.Phases[1]
	if len(d.FlowsAdded) != ProbeFlows || !near(d.FlowsAdded[2], 46, 0.01) || !near(d.FlowsAdded[0], 40, 0.01) {
		t.Fatalf("download flows %v", d.FlowsAdded)
	}
	if f, ok := d.CollidedFlow(); ok {
		t.Errorf("flow %d collided at 46 ms against 40: a 6 ms gap under a 40 ms queue is not twice the others", f)
	}
	if _, ok := res.Phases[2].CollidedFlow(); ok {
		t.Errorf("upload: no collision")
	}
	if p := res.Samples.Probes[6]; p.Flow != 2 {
		t.Errorf("probe 6 on flow %d, want 2", p.Flow)
	}
	// on a calm link the same 6 ms stands out
	rw = synth()
	for i := range rw.probes {
		r := &rw.probes[i]
		r.flow = int(r.seq) % ProbeFlows
		if r.sent >= 2e9 && r.sent < 4e9 && r.replied() {
			r.recv -= 40e6 // no queue
			if r.flow == 2 {
				r.recv += 6e6
			}
		}
	}
	res = bbresult.Result{}
	analyze(rw, &res)
	if f, ok := res.Phases[1].CollidedFlow(); !ok || f != 2 {
		t.Errorf("collision on flow %d %v, want flow 2 (flows %v)", f, ok, res.Phases[1].FlowsAdded)
	}
	if all := strings.Join(res.Notes, "\n"); !strings.Contains(all, "download: probe flow 3 of 4 waited +6.0 ms") {
		t.Errorf("notes lack the collision:\n%s", all)
	}
}

func TestOffsetDrift(t *testing.T) {
	// Before the load the fastest probes say +1 ms, after it +3 ms, 10 s
	// later: the model must interpolate between them and not be swayed by
	// the slow (queued, hence asymmetric) probes.
	mk := func(at int64, off int64, upQ int64) record {
		const wall0 = 0
		sent := at
		up, down := int64(2e6)+upQ, int64(2e6)
		srvRecv := wall0 + sent + up + off
		return record{sent: sent, srvRecv: srvRecv, srvSend: srvRecv, recv: sent + up + down}
	}
	var before, after []record
	for i := range int64(20) {
		before = append(before, mk(i*1e7, 1e6, 0))
		before = append(before, mk(i*1e7+5e6, 1e6, 30e6))
		after = append(after, mk(10e9+i*1e7, 3e6, 0))
	}
	m := fitOffset(0, before, after, nil)
	for _, c := range []struct{ t, want int64 }{{0, 1e6}, {5e9, 2e6}, {10e9, 3e6}} {
		if got := m.at(c.t); !near(got, float64(c.want), 2e4) {
			t.Errorf("offset at %d ns: %.0f, want %d", c.t, got, c.want)
		}
	}
	if m := fitOffset(0, before, nil, nil); m.slope != 0 || !near(m.at(9e9), 1e6, 1) {
		t.Errorf("one estimate must give a constant offset, got %+v", m)
	}
}

func TestProbeLoadNote(t *testing.T) {
	phases := func(down, up float64) []bbresult.Phase {
		return []bbresult.Phase{
			{Name: bbresult.PhaseIdleBefore},
			{Name: bbresult.PhaseDownload, DownloadMbps: down},
			{Name: bbresult.PhaseUpload, UploadMbps: up},
		}
	}
	for _, tt := range []struct {
		name string
		res  bbresult.Result
		want string // substring; "" means no note
	}{
		{"cable 7 Mbit/s up: 1%", bbresult.Result{ProbeInterval: 10, Family: "ipv4", Phases: phases(35, 7)}, ""},
		{"adsl 0.7 Mbit/s up: 11%", bbresult.Result{ProbeInterval: 10, Family: "ipv4", Phases: phases(6.3, 0.7)},
			"probes are 74 kbit/s each way (92-byte IP packets every 10 ms), 11% of the upload goodput"},
		{"adsl, suggested interval keeps them at 2.5%", bbresult.Result{ProbeInterval: 10, Family: "ipv4", Phases: phases(6.3, 0.7)},
			"--probe-interval 43ms"},
		{"ipv6 headers count", bbresult.Result{ProbeInterval: 10, Family: "ipv6", Phases: phases(6.3, 0.7)}, "112-byte IP packets"},
		{"slow download", bbresult.Result{ProbeInterval: 10, Family: "ipv4", Phases: phases(1, 20)}, "of the download goodput"},
		{"adsl with 50 ms probes: 2%", bbresult.Result{ProbeInterval: 50, Family: "ipv4", Phases: phases(6.3, 0.7)}, ""},
		{"no load phase", bbresult.Result{ProbeInterval: 10, Phases: []bbresult.Phase{{Name: bbresult.PhaseIdleBefore}}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := probeLoadNote(&tt.res)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("note %q, want one containing %q", got, tt.want)
			}
		})
	}
}

// TestReorderedByArrival: reordering is counted per flow, in the order the
// kernel stamped the arrivals, whatever order the receivers ran in. Flows
// interleave freely (four flows through one FIFO arrive in sequence, but
// through fq_codel's queues they may pass each other): only a probe that
// arrives after a later probe of its own flow counts.
func TestReorderedByArrival(t *testing.T) {
	ms := int64(time.Millisecond)
	rec := func(seq uint32, recv int64) record {
		return record{seq: seq, flow: int(seq % 2), sent: int64(seq) * ms, recv: recv}
	}
	for _, c := range []struct {
		name string
		rs   []record
		want []uint32
	}{
		// the receivers handed these over out of order; the stamps say FIFO
		{"FIFO, read out of order", []record{rec(0, 10*ms), rec(1, 11*ms), rec(2, 12*ms), rec(3, 13*ms), rec(4, 14*ms)}, nil},
		// flow 1 overtakes flow 0: not reordering
		{"flows pass each other", []record{rec(0, 20*ms), rec(1, 11*ms), rec(2, 21*ms), rec(3, 12*ms)}, nil},
		// seq 2 arrives after seq 4 of its own flow
		{"within a flow", []record{rec(0, 10*ms), rec(2, 30*ms), rec(4, 20*ms), rec(6, 40*ms)}, []uint32{2}},
		{"lost probes do not count", []record{rec(0, 10*ms), {seq: 2}, rec(4, 20*ms)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			markReordered(c.rs)
			var got []uint32
			for _, r := range c.rs {
				if r.reordered {
					got = append(got, r.seq)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("reordered %v, want %v", got, c.want)
			}
		})
	}
}

// No delay is below zero: a round trip whose realtime stamp stepped before
// its monotonic send is 0, and a one-way delay the offset model puts below
// zero is 0 with the other carrying the whole round trip.
func TestNoNegativeDelay(t *testing.T) {
	r := record{sent: 100, recv: 90, srvRecv: 1000, srvSend: 1000}
	if got := r.rtt(); got != 0 {
		t.Errorf("rtt %v, want 0", got)
	}
	wall0 := int64(1_700_000_000_000_000_000)
	r = record{sent: 0, recv: 10e6, srvRecv: wall0 + 12e6, srvSend: wall0 + 12e6} // server clock ahead
	up, down := offsetModel{}.oneWay(wall0, r)
	if up != 10 || down != 0 {
		t.Errorf("one-way %v/%v ms, want 10/0", up, down)
	}
}

// TestNoGradeWithoutLoad: a loaded direction that carried under
// MinLoadKbit, or stopped carrying in its phase's second half, and a loaded
// phase whose probes were mostly lost, leave nothing to grade; a slow
// asymmetric line (an upload a fortieth of its download) is graded.
func TestNoGradeWithoutLoad(t *testing.T) {
	lat := bbresult.Stats{N: 100, Median: 20, Mean: 20}
	phase := func(name string, down, up float64) bbresult.Phase {
		return bbresult.Phase{Name: name, Start: 0, End: 10, DownloadMbps: down, UploadMbps: up, Latency: lat, ProbesSent: 100}
	}
	steady := func(down, up float64) []bbresult.Throughput {
		var s []bbresult.Throughput
		for i := 1; i <= 40; i++ {
			s = append(s, bbresult.Throughput{T: float64(i) / 4, Download: down, Upload: up})
		}
		return s
	}
	for _, c := range []struct {
		name    string
		phases  []bbresult.Phase
		samples []bbresult.Throughput
		want    string
	}{
		{"loaded", []bbresult.Phase{phase("idle_before", 0, 0), phase("download", 40, 0.2)}, steady(40, 0.2), ""},
		{"slow asymmetric upload", []bbresult.Phase{phase("upload", 0.05, 0.9)}, steady(0.05, 0.9), ""},
		{"idle phases are not judged", []bbresult.Phase{phase("idle_before", 0, 0)}, nil, ""},
		{"empty download", []bbresult.Phase{phase("download", 0, 0.1)}, steady(0, 0.1), "the download never carried data"},
		{"trickle", []bbresult.Phase{phase("upload", 1, 0.01)}, nil, "the upload never carried data"},
		{"bidirectional needs both", []bbresult.Phase{phase("bidirectional", 30, 0)}, nil, "the upload never carried data"},
		{"stalled", []bbresult.Phase{phase("download", 8, 0)}, append(steady(40, 0)[:20], steady(0, 0)[20:]...), "the download stopped carrying data"},
		{"probes lost", []bbresult.Phase{func() bbresult.Phase { p := phase("download", 40, 0); p.LostUp, p.LostDown = 30, 31; return p }()}, nil, "61 of the download phase's 100 latency probes"},
		{"no probe answered", []bbresult.Phase{func() bbresult.Phase {
			p := phase("download", 40, 0)
			p.Latency, p.ProbesSent = bbresult.Stats{}, 0
			return p
		}()}, nil, "no latency probe was answered"},
	} {
		res := &bbresult.Result{Phases: c.phases, Samples: bbresult.Samples{Throughput: c.samples}}
		got := unmeasured(res, [2]string{"down why", "up why"})
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: %q, want it graded", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		case strings.HasPrefix(c.want, "the download") && !strings.HasSuffix(got, "down why"), strings.HasPrefix(c.want, "the upload") && !strings.HasSuffix(got, "up why"):
			t.Errorf("%s: %q lacks the client's account of that direction", c.name, got)
		}
	}
}

// TestReportLost: without the server's report (its control connection's
// last exchange lost), a lost probe's way is not known: the probes are
// lost either way, none is blamed on the upload, and the one-way delays of
// the probes that came back stand.
func TestReportLost(t *testing.T) {
	rw := synth()
	rw.lossEither = true
	var res bbresult.Result
	analyze(rw, &res)
	either, up := 0, 0
	for _, p := range res.Samples.Probes {
		switch p.Lost {
		case bbresult.LostEither:
			either++
		case "up", "down":
			up++
		}
	}
	if either != 8 || up != 0 {
		t.Errorf("%d probes lost either way, %d blamed on a way; want 8 and 0", either, up)
	}
	if !near(res.Phases[1].AddedDown, 40, 0.01) {
		t.Errorf("download's one-way added %v, want 40", res.Phases[1].AddedDown)
	}
}
