package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/accept"
)

// gradeLoad is the length of each graded load phase. The first ~0.5 s of a
// download is a slow-start transient that fills the modem's FIFO before an
// ingress shaper (behind the bottleneck) can signal TCP; in sqmkit test's
// default 10 s phases that transient is ~5 % of the probes, i.e. exactly
// the p95. RRUL runs 60 s of load; 30 s keeps `ci` within its budget and
// lets the p95 describe the steady state. Every sample still counts:
// firstWindow's p95 is recorded beside it as what a 10 s phase would say.
const (
	gradeLoad   = 30 * time.Second
	firstWindow = 10 * time.Second
)

// Phase lengths of the iperf3 + irtt cross-check: sqmkit test's defaults
// (5 s idle, 10 s per load phase, 4 streams each way). It compares medians
// and goodput, which 10 s settle; it is not graded, so it stays short.
const (
	crossIdle    = 5 * time.Second
	crossLoad    = 10 * time.Second
	crossGap     = 2 * time.Second // iperf3 connection setup and teardown
	crossStreams = "4"
)

// startServers runs the measurement servers in the server namespace.
func (t *topo) startServers(sqmkit string, haveServe bool) error {
	daemons := [][]string{{"iperf3", "-s"}, {"irtt", "server", "-i", "0", "-b", serverIP}}
	if haveServe {
		// a trace's load runs for minutes
		daemons = append(daemons, []string{sqmkit, "serve", "--max-duration", "10m"})
	}
	for _, d := range daemons {
		p, err := t.sh.daemon(nsServer, filepath.Join(t.logs, filepath.Base(d[0])+"-server.log"), d...)
		if err != nil {
			return err
		}
		t.procs = append(t.procs, p)
	}
	time.Sleep(time.Second)
	return nil
}

// sqmkitTest grades the path with `sqmkit test` from the client namespace:
// every load phase, or only the one named (with its idle phases).
func (t *topo) sqmkitTest(sqmkit, out, name, only string) (accept.Measurement, *bbresult.Result, error) {
	js, plot := filepath.Join(out, name+".test.json"), filepath.Join(out, name+".png")
	args := []string{sqmkit, "test"}
	for _, ph := range []struct{ flag, name string }{{"--download", accept.Download}, {"--upload", accept.Upload}, {"--bidir", accept.Bidir}} {
		d := gradeLoad
		if only != "" && only != ph.name {
			d = 0
		}
		args = append(args, ph.flag, d.String())
	}
	target := t.target
	if len(target) == 0 {
		target = []string{serverIP}
	}
	log, err := t.sh.run(nsClient, append(append(args, "--json", js, "--plot", plot), target...)...)
	os.WriteFile(filepath.Join(out, name+".test.log"), []byte(log), 0o644)
	if err != nil {
		return accept.Measurement{}, nil, err
	}
	r, err := readResult(js)
	if err != nil {
		return accept.Measurement{}, nil, err
	}
	return fromBB(r, js, plot), r, nil
}

// readResult reads a test's --json file.
func readResult(js string) (*bbresult.Result, error) {
	b, err := os.ReadFile(js)
	if err != nil {
		return nil, err
	}
	var r bbresult.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", js, err)
	}
	return &r, nil
}

// bbPhase returns the named phase of a test result, or nil.
func bbPhase(r *bbresult.Result, name string) *bbresult.Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

func fromBB(r *bbresult.Result, js, plot string) accept.Measurement {
	m := accept.Measurement{Tool: r.Tool, IdleRTT: r.IdleRTT, Grade: r.Grades.DSLReports, Raw: js, Plot: plot}
	for _, p := range r.Phases {
		if !slices.Contains(accept.LoadPhases, p.Name) {
			continue
		}
		loss := 0.0
		if p.ProbesSent > 0 {
			loss = 100 * float64(p.LostUp+p.LostDown) / float64(p.ProbesSent)
		}
		ap := accept.Phase{Name: p.Name, AddedMean: p.AddedMean, AddedMedian: p.AddedMedian, AddedP95: p.AddedP95,
			AddedP99: p.AddedP99, AddedDown: p.AddedDown, AddedUp: p.AddedUp, Latency: p.Latency.Median, Loss: loss, DownMbps: p.DownloadMbps, UpMbps: p.UploadMbps,
			AddedP95First: firstP95(r, p)}
		if f, ok := p.CollidedFlow(); ok {
			ap.Collision = fmt.Sprintf("probe flow %d of %d at +%.1f ms (median) against the others' %s ms: it shared a bulk flow's hash bucket",
				f+1, len(p.FlowsAdded), p.FlowsAdded[f], flowList(p.FlowsAdded, f))
		}
		m.Phases = append(m.Phases, ap)
	}
	return m
}

// firstP95 is the added p95 over the phase's first firstWindow: a
// diagnostic of the start transient, never graded. It uses sqmkit test's
// own baseline (its p95 minus its added p95); nil when the phase is no
// longer than the window.
func firstP95(r *bbresult.Result, p bbresult.Phase) *float64 {
	if p.End-p.Start <= firstWindow.Seconds() {
		return nil
	}
	var rtts []float64
	for _, s := range r.Samples.Probes {
		if s.T >= p.Start && s.T < p.Start+firstWindow.Seconds() && s.Lost == "" {
			rtts = append(rtts, s.RTT)
		}
	}
	if len(rtts) == 0 {
		return nil
	}
	v := quantile(rtts, 0.95) - (p.Latency.P95 - p.AddedP95)
	return &v
}

// iperfIrtt measures the same three phases with iperf3 (goodput, 4 streams)
// while irtt probes every 10 ms: the independent cross-check of sqmkit test.
func (t *topo) iperfIrtt(out, name string) (accept.Measurement, error) {
	m := accept.Measurement{Tool: "iperf3+irtt"}
	irttJSON := filepath.Join(out, name+".irtt.json")
	total := crossIdle + 3*(crossLoad+crossGap) + time.Second
	irtt, err := t.sh.daemon(nsClient, filepath.Join(out, name+".irtt.log"), "irtt", "client", "-Q", "-i", "10ms", "--wait=3s",
		"-d", total.String(), "-o", irttJSON, serverIP)
	if err != nil {
		return m, err
	}
	start := time.Now()
	type window struct {
		name     string
		from, to time.Time
	}
	var wins []window
	phases := []struct {
		name string
		args []string
	}{{accept.Download, []string{"-R"}}, {accept.Upload, nil}, {accept.Bidir, []string{"--bidir"}}}
	for i, ph := range phases {
		time.Sleep(time.Until(start.Add(crossIdle + time.Duration(i)*(crossLoad+crossGap))))
		from := time.Now()
		args := append([]string{"iperf3", "-J", "-c", serverIP, "-P", crossStreams, "-t", fmt.Sprint(int(crossLoad.Seconds()))}, ph.args...)
		res, err := t.sh.run(nsClient, args...)
		os.WriteFile(filepath.Join(out, name+".iperf3-"+ph.name+".json"), []byte(res), 0o644)
		if err != nil {
			irtt.stop()
			return m, err
		}
		down, up, err := iperfRates(res, ph.name)
		if err != nil {
			irtt.stop()
			return m, err
		}
		// Skip connection setup: latency counts from the first loaded second.
		wins = append(wins, window{ph.name, from.Add(time.Second), time.Now()})
		m.Phases = append(m.Phases, accept.Phase{Name: ph.name, DownMbps: down, UpMbps: up})
	}
	select {
	case <-irtt.done:
	case <-time.After(time.Until(start.Add(total + 20*time.Second))):
		irtt.stop()
	}
	rtts, err := readIrtt(irttJSON)
	if err != nil {
		return m, err
	}
	idle := rttsBetween(rtts, start, start.Add(crossIdle))
	if len(idle) == 0 {
		return m, fmt.Errorf("irtt: no idle round trips in %s", irttJSON)
	}
	idleMed := quantile(idle, 0.5)
	m.IdleRTT = idleMed
	addedMean := 0.0
	for i, w := range wins {
		sent, lat := 0, []float64{}
		for _, r := range rtts {
			if r.at.Before(w.from) || r.at.After(w.to) {
				continue
			}
			sent++
			if !r.lost {
				lat = append(lat, r.rtt)
			}
		}
		if len(lat) == 0 {
			return m, fmt.Errorf("irtt: no round trips during %s", w.name)
		}
		p := &m.Phases[i]
		p.Latency = quantile(lat, 0.5)
		p.AddedMedian = p.Latency - idleMed
		p.AddedP95 = quantile(lat, 0.95) - idleMed
		p.AddedP99 = quantile(lat, 0.99) - idleMed
		p.Loss = 100 * float64(sent-len(lat)) / float64(sent)
		if w.name != accept.Bidir {
			mean := 0.0
			for _, v := range lat {
				mean += v / float64(len(lat))
			}
			addedMean += (mean - idleMed) / 2
		}
	}
	// The DSLReports letter: mean added latency of download and upload.
	m.Grade = bbresult.Grade(addedMean)
	return m, nil
}

// iperfRates returns receiver-side goodput in Mbit/s from iperf3 -J output.
func iperfRates(js, phase string) (down, up float64, err error) {
	var r struct {
		End struct {
			Received struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			ReceivedReverse struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received_bidir_reverse"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		return 0, 0, fmt.Errorf("iperf3 -J output: %w", err)
	}
	if r.Error != "" {
		return 0, 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	fwd, rev := r.End.Received.BitsPerSecond/1e6, r.End.ReceivedReverse.BitsPerSecond/1e6
	switch phase {
	case accept.Download:
		return fwd, 0, nil // -R: the client is the receiver
	case accept.Upload:
		return 0, fwd, nil
	}
	return rev, fwd, nil
}

type roundTrip struct {
	at   time.Time
	rtt  float64 // ms
	lost bool
}

func readIrtt(path string) ([]roundTrip, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("irtt result: %w", err)
	}
	var r struct {
		RoundTrips []struct {
			Lost       string `json:"lost"`
			Timestamps struct {
				Client struct {
					Send struct{ Wall int64 } `json:"send"`
				} `json:"client"`
			} `json:"timestamps"`
			Delay struct{ RTT int64 } `json:"delay"`
		} `json:"round_trips"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]roundTrip, 0, len(r.RoundTrips))
	for _, x := range r.RoundTrips {
		out = append(out, roundTrip{at: time.Unix(0, x.Timestamps.Client.Send.Wall), rtt: float64(x.Delay.RTT) / 1e6,
			lost: x.Lost != "false"})
	}
	return out, nil
}

func rttsBetween(rs []roundTrip, from, to time.Time) []float64 {
	var v []float64
	for _, r := range rs {
		if !r.lost && !r.at.Before(from) && !r.at.After(to) {
			v = append(v, r.rtt)
		}
	}
	return v
}

// quantile interpolates linearly between order statistics.
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// flowList is the other flows' added medians, "+0.4/+0.6/+0.5".
func flowList(v []float64, skip int) string {
	var out []string
	for i, x := range v {
		if i != skip {
			out = append(out, bbresult.Signed(x, 1))
		}
	}
	return strings.Join(out, "/")
}
