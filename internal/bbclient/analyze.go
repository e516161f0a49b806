package bbclient

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/sqmkit/sqmkit/internal/bbproto"
	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// record is one probe as the client saw it. sent and recv are ns on the
// client's monotonic clock since the test started (recv 0: no reply);
// srvRecv and srvSend are the server's wall clock in ns.
type record struct {
	seq              uint32
	flow             int // index of the probe socket
	sent, recv       int64
	srvRecv, srvSend int64
	reordered        bool
}

func (r record) replied() bool { return r.recv != 0 }

// rtt excludes the server's own processing time, as irtt does, so that the
// two one-way delays add up to it exactly. It is never below zero: the
// send is a monotonic reading and the arrival a realtime kernel stamp, and
// a step of the realtime clock must not make a delay negative.
func (r record) rtt() float64 { return ms(max(0, r.recv-r.sent-(r.srvSend-r.srvRecv))) }

// markReordered marks each replied probe that arrived after a later probe
// of its own flow, in the order the kernel stamped the arrivals: probes of
// different flows may pass each other in a flow-queueing qdisc, and the
// order receiver goroutines happen to run in says nothing
// (TestReorderedByArrival).
func markReordered(rs []record) {
	byFlow := map[int][]int{}
	for i, r := range rs {
		if r.replied() {
			byFlow[r.flow] = append(byFlow[r.flow], i)
		}
	}
	for _, idx := range byFlow {
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rs[a].recv, rs[b].recv) })
		maxSeq := int64(-1)
		for _, i := range idx {
			rs[i].reordered = int64(rs[i].seq) < maxSeq
			maxSeq = max(maxSeq, int64(rs[i].seq))
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// span is one phase as run: its window in seconds since the start and the
// goodput byte counters at its edges.
type span struct {
	name       string
	start, end float64
	down, up   int64 // payload bytes moved during the phase
	loaded     bool
}

// raw is everything a run collected, before analysis.
type raw struct {
	rttOnly    bool  // the probes have no server stamps (AnalyzeRTT)
	wall0      int64 // client wall clock (ns) at the start
	probes     []record
	serverSaw  func(seq uint32) bool
	lossEither bool // no server report: a lost probe's way is not known
	spans      []span
	throughput []bbresult.Throughput
	inflow     []bbresult.InFlow
	notes      []string
	// why says what the client knows of each direction's load (download,
	// upload), for the reason a phase whose load never flowed gives.
	why [2]string
}

// offsetModel is the server clock minus the client clock, in ns, as a
// linear function of client time: the NTP-style estimate from the fastest
// idle probes before the load and after it, with the drift between them
// interpolated. One estimate means a constant offset.
type offsetModel struct {
	t0, o0, slope float64
}

func (m offsetModel) at(t int64) float64 { return m.o0 + m.slope*(float64(t)-m.t0) }

// estimate returns the offset seen by the fastest tenth of rs's replied
// probes: those crossed empty queues, so their up and down delays are
// closest to equal, which is the one assumption an offset estimate without
// synchronised clocks has to make. The median of them resists one odd probe.
func estimate(wall0 int64, rs []record) (t, off float64, ok bool) {
	var fast []record
	for _, r := range rs {
		if r.replied() {
			fast = append(fast, r)
		}
	}
	if len(fast) == 0 {
		return 0, 0, false
	}
	slices.SortFunc(fast, func(a, b record) int { return cmpFloat(a.rtt(), b.rtt()) })
	fast = fast[:max(1, len(fast)/10)]
	offs := make([]float64, len(fast))
	sum := 0.0
	for i, r := range fast {
		up := float64(r.srvRecv - (wall0 + r.sent))
		down := float64(r.srvSend - (wall0 + r.recv))
		offs[i] = (up + down) / 2
		sum += float64(r.sent)
	}
	return sum / float64(len(fast)), median(offs), true
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fitOffset builds the offset model from the probes of the idle phases
// before and after the load; with no idle phase it uses all probes.
func fitOffset(wall0 int64, before, after, all []record) offsetModel {
	t1, o1, ok1 := estimate(wall0, before)
	t2, o2, ok2 := estimate(wall0, after)
	switch {
	case ok1 && ok2 && t2 > t1:
		return offsetModel{t0: t1, o0: o1, slope: (o2 - o1) / (t2 - t1)}
	case ok1:
		return offsetModel{t0: t1, o0: o1}
	case ok2:
		return offsetModel{t0: t2, o0: o2}
	}
	t, o, _ := estimate(wall0, all)
	return offsetModel{t0: t, o0: o}
}

// oneWay returns the up and down delays of a replied probe in ms. The
// clock terms are subtracted as integers first: wall-clock nanoseconds do
// not fit a float64 at nanosecond precision.
//
// An error of the offset model can put one of them below zero; that one is
// then zero and the other the whole round trip, so neither is impossible
// and they still add up to it.
func (m offsetModel) oneWay(wall0 int64, r record) (up, down float64) {
	up = (float64(r.srvRecv-(wall0+r.sent)) - m.at(r.sent)) / 1e6
	down = (float64(wall0+r.recv-r.srvSend) + m.at(r.recv)) / 1e6
	switch rtt := r.rtt(); {
	case up < 0:
		return 0, rtt
	case down < 0:
		return rtt, 0
	}
	return up, down
}

func isIdle(name string) bool {
	return name == bbresult.PhaseIdleBefore || name == bbresult.PhaseIdleAfter
}

// analyze turns raw data into the result's phases, grades, samples and notes.
func analyze(rw *raw, res *bbresult.Result) {
	if !rw.rttOnly { // concurrent handshakes have no order to keep
		markReordered(rw.probes)
	}
	byPhase := map[string][]record{}
	for _, r := range rw.probes {
		t := float64(r.sent) / 1e9
		for _, s := range rw.spans {
			if s.holds(t) {
				byPhase[s.name] = append(byPhase[s.name], r)
			}
		}
	}
	var model offsetModel
	if !rw.rttOnly {
		model = fitOffset(rw.wall0, byPhase[bbresult.PhaseIdleBefore], byPhase[bbresult.PhaseIdleAfter], rw.probes)
	}

	res.Samples.Probes = make([]bbresult.Probe, len(rw.probes))
	for i, r := range rw.probes {
		p := bbresult.Probe{T: float64(r.sent) / 1e9, Seq: r.seq, Flow: r.flow}
		switch {
		case r.replied():
			p.RTT = r.rtt()
			if !rw.rttOnly {
				p.Up, p.Down = model.oneWay(rw.wall0, r)
			}
		case rw.rttOnly || rw.lossEither:
			p.Lost = bbresult.LostEither
		case rw.serverSaw(r.seq):
			p.Lost = "down"
		default:
			p.Lost = "up"
		}
		res.Samples.Probes[i] = p
	}
	res.Samples.Throughput = rw.throughput
	res.Samples.InFlow = rw.inflow

	series := map[string]*perPhase{}
	var idle []float64
	for _, s := range rw.spans {
		series[s.name] = seriesOf(res.Samples.Probes, s)
		if isIdle(s.name) {
			idle = append(idle, series[s.name].rtt...)
		}
	}
	res.IdleRTT = median(idle)
	b := baselineOf(series, res)
	res.Phases = nil
	for _, s := range rw.spans {
		res.Phases = append(res.Phases, phaseOf(rw, res, s, series[s.name], byPhase[s.name], b))
	}
	res.Grades = grade(res.Phases)
	if rw.rttOnly {
		res.Grades.Basis = bbresult.BasisHandshakes
	}
	res.Notes = append(res.Notes, rw.notes...)
	res.Notes = append(res.Notes, notes(res, model)...)
	if why := unmeasured(res, rw.why); why != "" {
		if res.Incomplete != "" && res.Incomplete != why {
			res.Notes = append(res.Notes, res.Incomplete)
		}
		res.Incomplete = why
		res.Notes = append(res.Notes, why)
	}
	if res.Incomplete != "" {
		res.Ungrade()
	}
}

// MinLoadKbit is the least goodput a loaded direction must carry for its
// phase to be graded. A phase whose load never flowed measured an idle
// link, and its grade would be an A+ for nothing (TestNoGradeWithoutLoad).
// The floor is far under any line a test can measure at all: the test's own
// probes take 50-130 kbit/s each way, and the slowest upload the lab grades
// (adsl-atm's 1 Mbit/s over ATM) carries fifty times it. It is absolute,
// never a share of the other direction: an asymmetric line's upload may
// carry a twentieth of its download.
const MinLoadKbit = 16

// maxLostShare: a loaded phase that lost more than this share of its
// probes has too few answers left to say what its delay was.
const maxLostShare = 0.5

// unmeasured says why res holds no test to grade, "" when it does: a
// loaded direction under MinLoadKbit over its phase, or over the phase's
// second half (a load that stalled once the buffers on its way were full:
// a server that stops reading an upload is acknowledged by its kernel
// until its receive buffer is full), a loaded phase whose probes were
// mostly lost or none answered. why is the client's account of each
// direction's load (download, upload), added to the reason.
func unmeasured(res *bbresult.Result, why [2]string) string {
	for _, p := range res.Phases {
		if !loadedPhase(p.Name) {
			continue
		}
		late := lateGoodput(res.Samples.Throughput, p)
		for d, mbps := range [2]float64{p.DownloadMbps, p.UploadMbps} {
			name := [2]string{"download", "upload"}[d]
			if !loads(p.Name, name) {
				continue
			}
			var reason string
			switch {
			case mbps*1000 < MinLoadKbit:
				reason = fmt.Sprintf("no grade: the %s never carried data (%s Mbit/s in the %s phase; a loaded direction must carry at least %d kbit/s)", name, bbresult.Fixed(mbps, 3), p.Name, MinLoadKbit)
			case late[d] >= 0 && late[d]*1000 < MinLoadKbit:
				reason = fmt.Sprintf("no grade: the %s stopped carrying data (%s Mbit/s over the %s phase's second half; a loaded direction must carry at least %d kbit/s)", name, bbresult.Fixed(late[d], 3), p.Name, MinLoadKbit)
			default:
				continue
			}
			if why[d] != "" {
				reason += " — " + why[d]
			}
			return reason
		}
		lost := p.LostUp + p.LostDown
		switch {
		case p.ProbesSent > 0 && float64(lost) > maxLostShare*float64(p.ProbesSent):
			return fmt.Sprintf("no grade: %d of the %s phase's %d latency probes got no answer, too few left to measure its delay", lost, p.Name, p.ProbesSent)
		case p.Latency.N == 0:
			return fmt.Sprintf("no grade: no latency probe was answered in the %s phase", p.Name)
		}
	}
	return ""
}

// lateGoodput is the mean goodput (download, upload; Mbit/s) of the
// throughput samples in p's second half, -1 where it has none.
func lateGoodput(samples []bbresult.Throughput, p bbresult.Phase) [2]float64 {
	mid := (p.Start + p.End) / 2
	var sum [2]float64
	n := 0
	for _, s := range samples {
		if s.T > mid && s.T <= p.End {
			sum[0] += s.Download
			sum[1] += s.Upload
			n++
		}
	}
	if n == 0 {
		return [2]float64{-1, -1}
	}
	return [2]float64{sum[0] / float64(n), sum[1] / float64(n)}
}

// loadedPhase: a phase of the test that loads the link (is graded).
func loadedPhase(name string) bool {
	return name == bbresult.PhaseDownload || name == bbresult.PhaseUpload || name == bbresult.PhaseBidir
}

// loads says whether phase name loads direction dir ("download",
// "upload").
func loads(name, dir string) bool { return name == bbresult.PhaseBidir || name == dir }

// holds says whether t (seconds into the test) falls in the span.
func (s span) holds(t float64) bool { return t >= s.start && t < s.end }

// perPhase are a phase's replied probes: round trips, one-way delays, and
// round trips by probe flow.
type perPhase struct {
	rtt, up, down []float64
	flows         [][]float64
}

func seriesOf(probes []bbresult.Probe, s span) *perPhase {
	pp := &perPhase{}
	for _, p := range probes {
		if !s.holds(p.T) || p.Lost != "" {
			continue
		}
		pp.rtt = append(pp.rtt, p.RTT)
		pp.up = append(pp.up, p.Up)
		pp.down = append(pp.down, p.Down)
		for len(pp.flows) <= p.Flow {
			pp.flows = append(pp.flows, nil)
		}
		pp.flows[p.Flow] = append(pp.flows[p.Flow], p.RTT)
	}
	return pp
}

// baseline is what a phase's latency is added to.
type baseline struct{ mean, median, up, down float64 }

// baselineOf is the idle phase before the load. The one after it starts
// while the bottleneck's queue is still draining, which would flatter a
// bloated link; it serves the drift estimate and shows whether latency
// came back down. With no idle phase, the fastest probe is the best guess
// of the unloaded path.
func baselineOf(series map[string]*perPhase, res *bbresult.Result) baseline {
	base := series[bbresult.PhaseIdleBefore]
	if base == nil || len(base.rtt) == 0 {
		base = series[bbresult.PhaseIdleAfter]
	}
	var b baseline
	if base != nil && len(base.rtt) > 0 {
		st := summarize(slices.Clone(base.rtt))
		b.mean, b.median = st.Mean, st.Median
		b.up, b.down = median(base.up), median(base.down)
		return b
	}
	if all := repliedRTTs(res.Samples.Probes); len(all) > 0 {
		b.mean = slices.Min(all)
		b.median = b.mean
	}
	res.Notes = append(res.Notes, "no idle phase: added latency is relative to the fastest probe of the whole test")
	return b
}

// phaseOf is span s's phase: goodput, latency over the baseline, losses
// and reordering, and a grade when loaded.
func phaseOf(rw *raw, res *bbresult.Result, s span, pp *perPhase, sent []record, b baseline) bbresult.Phase {
	ph := bbresult.Phase{Name: s.name, Start: s.start, End: s.end}
	if d := s.end - s.start; d > 0 {
		ph.DownloadMbps = float64(s.down) * 8 / 1e6 / d
		ph.UploadMbps = float64(s.up) * 8 / 1e6 / d
	}
	ph.Latency = summarize(slices.Clone(pp.rtt))
	var in []float64
	for _, f := range rw.inflow {
		if s.holds(f.T) {
			in = append(in, f.RTT)
		}
	}
	ph.InFlow = summarize(in)
	for _, r := range sent {
		ph.ProbesSent++
		if r.reordered {
			ph.Reordered++
		}
	}
	for _, p := range res.Samples.Probes {
		if s.holds(p.T) {
			switch p.Lost {
			case "up", bbresult.LostEither:
				ph.LostUp++
			case "down":
				ph.LostDown++
			}
		}
	}
	if ph.Latency.N == 0 {
		return ph
	}
	ph.AddedMean = ph.Latency.Mean - b.mean
	ph.AddedMedian = ph.Latency.Median - b.median
	ph.AddedP95 = ph.Latency.P95 - b.median
	ph.AddedP99 = ph.Latency.P99 - b.median
	ph.AddedUp = median(pp.up) - b.up
	ph.AddedDown = median(pp.down) - b.down
	if len(pp.flows) > 1 {
		for _, f := range pp.flows {
			ph.FlowsAdded = append(ph.FlowsAdded, median(f)-b.median)
		}
	}
	if s.loaded {
		ph.Grade = bbresult.Grade(ph.AddedMean)
	}
	return ph
}

func repliedRTTs(ps []bbresult.Probe) []float64 {
	var v []float64
	for _, p := range ps {
		if p.Lost == "" {
			v = append(v, p.RTT)
		}
	}
	return v
}

// grade computes the overall verdicts from the loaded phases.
//
// DSLReports/Waveform: the mean latency increase during the download phase
// and during the upload phase, averaged (a run with only one of them uses
// that one; with neither, the bidirectional phase). Percentile: the worst
// p95 increase of any loaded phase, because a link that is fine on average
// but stalls a call every few seconds is not fine.
func grade(phases []bbresult.Phase) bbresult.Grades {
	g := bbresult.Grades{Basis: bbresult.BasisProbes}
	var dsl []float64
	var bidir *bbresult.Phase
	worst := math.Inf(-1)
	for i, p := range phases {
		if p.Grade == "" {
			continue
		}
		switch p.Name {
		case bbresult.PhaseDownload, bbresult.PhaseUpload:
			dsl = append(dsl, p.AddedMean)
		case bbresult.PhaseBidir:
			bidir = &phases[i]
		}
		worst = max(worst, p.AddedP95)
	}
	if len(dsl) == 0 && bidir != nil {
		dsl = append(dsl, bidir.AddedMean)
	}
	if len(dsl) > 0 {
		sum := 0.0
		for _, v := range dsl {
			sum += v
		}
		g.DSLReportsAddedMs = sum / float64(len(dsl))
		g.DSLReports = bbresult.Grade(g.DSLReportsAddedMs)
	}
	if !math.IsInf(worst, -1) {
		g.PercentileAddedMs = worst
		g.Percentile = bbresult.Grade(worst)
	}
	return g
}

// Thresholds for the notes.
const (
	// A queue is worth locating once it adds this much.
	queueNoteMs = 5.0
	// In the bidirectional phase both directions carry the same number of
	// streams; if one direction still holds this share of the added delay,
	// the two directions' capacities or buffers differ a lot (DSL, DOCSIS,
	// LTE) and SQM has to be tuned per direction.
	asymShare = 0.8
	lossNote  = 0.01
	// Above this share of a direction's goodput the probes stop being a
	// sparse flow and queue like a load of their own (lab, ADSL 1 Mbit/s
	// ATM uplink: 10 ms probes, cake upload p95 +35 ms; 50 ms probes, +15 ms).
	probeShare = 0.05
)

// probeLoadNote warns when the probes themselves are a noticeable load on
// the slowest measured direction.
func probeLoadNote(res *bbresult.Result) string {
	if res.ProbeInterval <= 0 {
		return ""
	}
	slowest, dir := math.Inf(1), ""
	for _, p := range res.Phases {
		if p.Name == bbresult.PhaseDownload && p.DownloadMbps > 0 && p.DownloadMbps < slowest {
			slowest, dir = p.DownloadMbps, "download"
		}
		if p.Name == bbresult.PhaseUpload && p.UploadMbps > 0 && p.UploadMbps < slowest {
			slowest, dir = p.UploadMbps, "upload"
		}
	}
	if dir == "" {
		return ""
	}
	ip := bbproto.ProbeDefaultSize + 8 + 20 // UDP + IPv4 headers
	if res.Family == "ipv6" {
		ip += 20
	}
	kbps := float64(ip*8) / res.ProbeInterval // bits per ms = kbit/s
	share := kbps / (slowest * 1000)
	if share < probeShare {
		return ""
	}
	return fmt.Sprintf("probes are %.0f kbit/s each way (%d-byte IP packets every %g ms), %.0f%% of the %s goodput: on a link this slow they queue like a load of their own and add latency; retest with --probe-interval %gms",
		kbps, ip, res.ProbeInterval, 100*share, dir, math.Ceil(float64(ip*8)/(probeShare/2*slowest*1000)))
}

func notes(res *bbresult.Result, m offsetModel) []string {
	var out []string
	for _, p := range res.Phases {
		if p.ProbesSent > 0 {
			if f := float64(p.LostUp+p.LostDown) / float64(p.ProbesSent); f >= lossNote {
				out = append(out, fmt.Sprintf("%s: %.1f%% of probes lost (%d up, %d down)", p.Name, 100*f, p.LostUp, p.LostDown))
			}
		}
		if f, ok := p.CollidedFlow(); ok && p.Grade != "" {
			others := slices.Delete(slices.Clone(p.FlowsAdded), f, f+1)
			out = append(out, fmt.Sprintf("%s: probe flow %d of %d waited +%.1f ms (median) where the others waited +%.1f ms at most: it shared a queue with a bulk flow, a hash collision in a flow-queueing qdisc with few queues (fq_codel's 1024; CAKE's set-associative hash avoids nearly all); the figures count every flow",
				p.Name, f+1, len(p.FlowsAdded), p.FlowsAdded[f], slices.Max(others)))
		}
		if p.Grade == "" || p.AddedMedian < queueNoteMs {
			continue
		}
		up, down := max(p.AddedUp, 0), max(p.AddedDown, 0)
		if up+down <= 0 {
			continue
		}
		share := down / (up + down)
		out = append(out, fmt.Sprintf("%s: %.0f%% of the added delay is downstream (server→client), %.0f%% upstream", p.Name, 100*share, 100*(1-share)))
		if p.Name == bbresult.PhaseBidir && (share >= asymShare || share <= 1-asymShare) {
			dir := "downstream"
			if share < 0.5 {
				dir = "upstream"
			}
			out = append(out, fmt.Sprintf("path looks asymmetric: with equal load both ways, %.0f%% of the added delay is %s", 100*max(share, 1-share), dir))
		}
		if p.InFlow.N > 0 && p.InFlow.Median > 2*p.Latency.Median+10 {
			out = append(out, fmt.Sprintf("%s: latency inside the TCP streams (median %.1f ms) is far above the probes' (%.1f ms): a flow-isolating qdisc (fq_codel, CAKE) shields sparse flows while bulk flows keep their own queue", p.Name, p.InFlow.Median, p.Latency.Median))
		}
	}
	if n := probeLoadNote(res); n != "" && !res.RTTOnly {
		out = append(out, n)
	}
	if ppm := m.slope * 1e6; math.Abs(ppm) > 100 {
		out = append(out, fmt.Sprintf("client and server clocks drift apart by %.0f ppm; one-way delays were corrected linearly", ppm))
	}
	return out
}
