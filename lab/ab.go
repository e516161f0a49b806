package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/search"
	"github.com/sqmkit/sqmkit/internal/tune"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// An A/B (`sqmkit-lab ab`) holds the router's shaper at one pair of rates
// and measures the bidirectional phase with several instruments in turn,
// round after round, so that what differs between them is the instrument
// and not the rates, the boot or the hour: whether tune's confirming test
// reads the bidirectional phase higher than its own step, and whether the
// router's own traffic queues more than the client's. Beside each test it
// samples the qdiscs' backlogs in the router and the modem, which place a
// queue: in the shaper, or past it in the modem's FIFO.

// abArm is one instrument: who sends and the test's phases.
type abArm struct {
	ns   string   // nsClient: forwarded through the router; nsRouter: the router's own traffic
	args []string // `sqmkit test` phase flags
}

// abArms are the instruments by name. client is the grade's phase;
// router the same phase of the router's own traffic, router-seg with its
// upload one segment per packet (bbclient.Config.OneSegment); step and confirm
// are tune's bidirectional step and its confirming test, long its
// bidirectional step on a slow line (search.LongPhase, its upload one
// segment per packet as tune sends it there).
var abArms = map[string]abArm{
	"client":     {nsClient, phaseArgs(0, 0, 0, gradeLoad)},
	"router":     {nsRouter, phaseArgs(0, 0, 0, gradeLoad)},
	"router-seg": {nsRouter, append(phaseArgs(0, 0, 0, gradeLoad), "--one-segment")},
	"step":       {nsRouter, phaseArgs(tune.DefaultIdle, 0, 0, tune.DefaultStep)},
	"confirm": {nsRouter, phaseArgs(tune.ConfirmIdle, tune.DefaultStep, tune.DefaultStep,
		tune.DefaultStep)},
	"long": {nsRouter, append(phaseArgs(tune.DefaultIdle, 0, 0, tune.LongOf(tune.DefaultIdle, tune.DefaultStep)), "--one-segment")},
}

// phaseArgs are `sqmkit test`'s phase flags; idle 0 keeps its default.
func phaseArgs(idle, down, up, bidir time.Duration) []string {
	a := []string{"--download", down.String(), "--upload", up.String(), "--bidir", bidir.String()}
	if idle > 0 {
		a = append([]string{"--idle", idle.String()}, a...)
	}
	return a
}

// abSpec is an A/B's plan: the rates (kbit/s), the arms in the order each
// round runs them, and how many rounds.
type abSpec struct {
	Down   int      `json:"download_kbit"`
	Up     int      `json:"upload_kbit"`
	Arms   []string `json:"arms"`
	Rounds int      `json:"rounds"`
}

func (s abSpec) check() error {
	if s.Down <= 0 || s.Up <= 0 {
		return fmt.Errorf("--rates %d/%d: want DOWN/UP in kbit/s, both positive", s.Down, s.Up)
	}
	if s.Rounds < 2 {
		return fmt.Errorf("--rounds %d: want at least 2 (a spread needs two)", s.Rounds)
	}
	if len(s.Arms) < 2 {
		return fmt.Errorf("--arms %s: want at least two of %s", strings.Join(s.Arms, ","), armNames())
	}
	for i, a := range s.Arms {
		if _, ok := abArms[a]; !ok {
			return fmt.Errorf("--arms: unknown arm %q: want some of %s", a, armNames())
		}
		if slices.Contains(s.Arms[:i], a) {
			return fmt.Errorf("--arms: %q twice", a)
		}
	}
	return nil
}

func armNames() string {
	var n []string
	for a := range abArms {
		n = append(n, a)
	}
	slices.Sort(n)
	return strings.Join(n, ", ")
}

// abTest is one arm's test in one round: its bidirectional phase as tune
// judges it, and each sampled qdisc during that judged window, keyed
// "ns dev kind".
type abTest struct {
	Round  int                   `json:"round"`
	Arm    string                `json:"arm"`
	Phase  search.Phase          `json:"phase"`
	Queues map[string]queueStats `json:"queues"`
	Error  string                `json:"error,omitempty"`
}

// abStat is one arm over the rounds: the bidirectional phase's added
// median, and its difference from the first arm's in the same round.
type abStat struct {
	Arm      string                `json:"arm"`
	N        int                   `json:"n"`
	Mean     float64               `json:"mean_ms"`
	SD       float64               `json:"sd_ms"`
	Min      float64               `json:"min_ms"`
	Max      float64               `json:"max_ms"`
	Up       float64               `json:"up_ms"`   // mean one-way share
	Down     float64               `json:"down_ms"` // mean one-way share
	PairN    int                   `json:"pair_n,omitempty"`
	PairMean float64               `json:"pair_mean_ms,omitempty"` // minus the first arm, round by round
	PairSE   float64               `json:"pair_se_ms,omitempty"`
	Queues   map[string]queueStats `json:"queues"` // the means of the arm's tests
}

type abResult struct {
	Spec  abSpec   `json:"spec"`
	Tests []abTest `json:"tests"`
	Stats []abStat `json:"stats"`
}

// abStats summarises tests per arm, in arms' order; the first arm is the
// reference of the paired differences (its own are empty).
func abStats(tests []abTest, arms []string) []abStat {
	byRound := map[string]map[int]float64{}
	for _, t := range tests {
		if t.Error != "" {
			continue
		}
		if byRound[t.Arm] == nil {
			byRound[t.Arm] = map[int]float64{}
		}
		byRound[t.Arm][t.Round] = t.Phase.AddedMedian
	}
	var out []abStat
	for i, a := range arms {
		s := abStat{Arm: a, Queues: map[string]queueStats{}}
		var v []float64
		for _, t := range tests {
			if t.Arm != a || t.Error != "" {
				continue
			}
			m := t.Phase.AddedMedian
			if len(v) == 0 {
				s.Min, s.Max = m, m
			}
			v = append(v, m)
			s.Min, s.Max = min(s.Min, m), max(s.Max, m)
			s.Up += t.Phase.AddedUp
			s.Down += t.Phase.AddedDown
			for k, q := range t.Queues {
				s.Queues[k] = s.Queues[k].plus(q, 1)
			}
		}
		s.N = len(v)
		if s.N == 0 {
			out = append(out, s)
			continue
		}
		s.Mean, s.SD = meanSD(v)
		s.Up /= float64(s.N)
		s.Down /= float64(s.N)
		for k, q := range s.Queues {
			s.Queues[k] = queueStats{}.plus(q, 1/float64(s.N))
		}
		if i > 0 {
			var d []float64
			for r, m := range byRound[a] {
				if ref, ok := byRound[arms[0]][r]; ok {
					d = append(d, m-ref)
				}
			}
			if s.PairN = len(d); s.PairN > 1 {
				var sd float64
				s.PairMean, sd = meanSD(d)
				s.PairSE = sd / math.Sqrt(float64(s.PairN))
			}
		}
		out = append(out, s)
	}
	return out
}

// meanSD is the mean and the sample standard deviation (0 for one value).
func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

// abLine is one arm's summary as the lab prints it.
func abLine(s abStat, ref string) string {
	if s.N == 0 {
		return fmt.Sprintf("%s: no test measured", s.Arm)
	}
	l := fmt.Sprintf("%s (%d): bidirectional %+.2f ms (sd %.2f, %+.1f to %+.1f; one-way up %+.1f, down %+.1f)",
		s.Arm, s.N, s.Mean, s.SD, s.Min, s.Max, s.Up, s.Down)
	if s.PairN > 1 {
		l += fmt.Sprintf("; minus %s in the same round %+.2f ms (standard error %.2f, %d rounds)", ref, s.PairMean, s.PairSE, s.PairN)
	}
	var ks []string
	for k := range s.Queues {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		q := s.Queues[k]
		if q.Backlog < 500 && q.PktPerS == 0 {
			continue
		}
		l += fmt.Sprintf("; %s %.1f KB", k, q.Backlog/1000)
		if q.PktPerS > 0 {
			l += fmt.Sprintf(", %.0f pkt/s of %.0f B", q.PktPerS, q.MeanPkt)
		}
		if q.DropPerS > 0 {
			l += fmt.Sprintf(", %.1f drops/s", q.DropPerS)
		}
	}
	return l
}

// abScenario starts backend name at the spec's rates and runs the rounds.
func (g *guest) abScenario(t *topo, name string, r *result, sp abSpec) error {
	sh, sq, sc, err := g.startTuned(t, name, r)
	if err != nil {
		return err
	}
	defer sh.run(nsRouter, sq, "stop", "--root", sc.root)
	link := &gradeLink{sh: sh, sq: sq, sc: sc}
	if err := link.SetRates(context.Background(), sp.Down, sp.Up); err != nil {
		return err
	}
	r.DownKbit, r.UpKbit = sp.Down, sp.Up
	dir := filepath.Join(r.Dir, "ab")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := g.settle("ab"); err != nil {
		return err
	}
	res := &abResult{Spec: sp}
	for round := 1; round <= sp.Rounds; round++ {
		for _, arm := range sp.Arms {
			at := abTest{Round: round, Arm: arm}
			ph, bl, err := g.abTest(t, sh, sq, dir, fmt.Sprintf("%02d-%s", round, arm), abArms[arm])
			if err != nil {
				at.Error = err.Error()
				g.say("ab: round %d, %s: %v", round, arm, err)
			}
			at.Phase, at.Queues = ph, bl
			res.Tests = append(res.Tests, at)
			if err == nil {
				g.say("ab: round %d, %s: bidirectional %s/%s ms (one-way up %s, down %s)", round, arm, bbresult.Signed(ph.AddedMedian, 1), bbresult.Signed(ph.AddedP95, 1), bbresult.Signed(ph.AddedUp, 1), bbresult.Signed(ph.AddedDown, 1))
			}
		}
	}
	res.Stats = abStats(res.Tests, sp.Arms)
	r.AB = res
	measured := 0
	for _, at := range res.Tests {
		if at.Error == "" {
			measured++
		}
	}
	want := sp.Rounds * len(sp.Arms)
	r.Checks = []accept.Check{{Name: "ab: tests measured", Got: float64(measured), Want: fmt.Sprintf("= %d", want), OK: measured == want}}
	r.Status = status(r.Checks)
	return nil
}

// abTest runs one arm's test while sampling the qdiscs, and returns its
// bidirectional phase and the qdiscs during the phase's judged window.
func (g *guest) abTest(t *topo, sh *shell, sq, dir, name string, a abArm) (search.Phase, map[string]queueStats, error) {
	stop := make(chan struct{})
	var samples []qdiscSample
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		samples = sampleQdiscs(stop, []string{nsRouter, nsModem}, 500*time.Millisecond)
	}()
	js := filepath.Join(dir, name+".test.json")
	var res *bbresult.Result
	var err error
	if a.ns == nsClient {
		_, res, err = t.sqmkitTest(g.tools.sqmkit, dir, name, accept.Bidir)
	} else {
		args := append(append([]string{sq, "test", "--quiet"}, a.args...), "--json", js, serverIP)
		var out string
		out, err = sh.run(nsRouter, args...)
		os.WriteFile(filepath.Join(dir, name+".test.log"), []byte(out), 0o644)
		if err == nil {
			res, err = readResult(js)
		}
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return search.Phase{}, nil, err
	}
	ph, err := search.PhaseOf(res, search.Bidir)
	if err != nil {
		return search.Phase{}, nil, err
	}
	var from, to time.Time
	for _, p := range res.Phases {
		if p.Name == accept.Bidir {
			from = res.Started.Add(time.Duration((p.Start + search.Transient) * float64(time.Second)))
			to = res.Started.Add(time.Duration(p.End * float64(time.Second)))
		}
	}
	return ph, queueWindow(samples, from, to), nil
}

// qdiscSample is one qdisc at one moment: its backlog and its counters
// since it was created.
type qdiscSample struct {
	At      time.Time
	Key     string // "ns dev kind"
	Backlog int
	Packets int64 // sent
	Bytes   int64 // sent
	Drops   int64
}

// sampleQdiscs reads `tc -s -j qdisc show` in each namespace every
// interval until stop closes. It keeps the queues that can stand: the
// root qdiscs (a shaper's tree counts its children) and tbf, the modem's
// line under netem's delay line, whose own backlog is packets in flight.
func sampleQdiscs(stop <-chan struct{}, nss []string, every time.Duration) []qdiscSample {
	var out []qdiscSample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		for _, ns := range nss {
			b, err := exec.Command("ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show").Output()
			if err != nil {
				continue
			}
			out = append(out, parseQdiscs(b, ns, time.Now())...)
		}
	}
}

func parseQdiscs(b []byte, ns string, at time.Time) []qdiscSample {
	var qs []struct {
		Kind    string `json:"kind"`
		Dev     string `json:"dev"`
		Root    bool   `json:"root"`
		Backlog int    `json:"backlog"`
		Packets int64  `json:"packets"`
		Bytes   int64  `json:"bytes"`
		Drops   int64  `json:"drops"`
	}
	if json.Unmarshal(b, &qs) != nil {
		return nil
	}
	var out []qdiscSample
	for _, q := range qs {
		if q.Kind == "tbf" || q.Root && q.Kind != "netem" && q.Kind != "noqueue" {
			out = append(out, qdiscSample{At: at, Key: ns + " " + q.Dev + " " + q.Kind, Backlog: q.Backlog,
				Packets: q.Packets, Bytes: q.Bytes, Drops: q.Drops})
		}
	}
	return out
}

// queueStats is one qdisc over a test's judged window: its mean backlog,
// and from its counters the packets it sent per second, their mean size
// and the drops per second. The upload's packets and their size count
// the download's ACKs beside the upload's data (an ACK is 52–72 bytes of
// IP, a data packet 1500), which decide how bursty the download's sender
// is; the drops say which queue overflowed.
type queueStats struct {
	Backlog  float64 `json:"backlog_bytes"`
	PktPerS  float64 `json:"packets_per_s"`
	MeanPkt  float64 `json:"mean_packet_bytes"`
	DropPerS float64 `json:"drops_per_s"`
}

// plus is q with o times f added, field by field (a sum, or a scaled copy
// of o from the zero value).
func (q queueStats) plus(o queueStats, f float64) queueStats {
	return queueStats{Backlog: q.Backlog + f*o.Backlog, PktPerS: q.PktPerS + f*o.PktPerS,
		MeanPkt: q.MeanPkt + f*o.MeanPkt, DropPerS: q.DropPerS + f*o.DropPerS}
}

// queueWindow is each qdisc's queueStats over the samples in [from, to];
// the rates need two samples of a qdisc there.
func queueWindow(s []qdiscSample, from, to time.Time) map[string]queueStats {
	out := map[string]queueStats{}
	n := map[string]int{}
	first, last := map[string]qdiscSample{}, map[string]qdiscSample{}
	for _, q := range s {
		if q.At.Before(from) || q.At.After(to) {
			continue
		}
		st := out[q.Key]
		st.Backlog += float64(q.Backlog)
		out[q.Key] = st
		if n[q.Key] == 0 {
			first[q.Key] = q
		}
		last[q.Key] = q
		n[q.Key]++
	}
	for k, st := range out {
		st.Backlog /= float64(n[k])
		a, b := first[k], last[k]
		if secs := b.At.Sub(a.At).Seconds(); secs > 0 {
			st.PktPerS = float64(b.Packets-a.Packets) / secs
			st.DropPerS = float64(b.Drops-a.Drops) / secs
			if b.Packets > a.Packets {
				st.MeanPkt = float64(b.Bytes-a.Bytes) / float64(b.Packets-a.Packets)
			}
		}
		out[k] = st
	}
	return out
}
