package refserver

import (
	"fmt"
	"regexp"
	"strconv"
)

// Stage is one direction of `sqmkit test --rpm`'s printed result: its RPM
// (the current draft's aggregation) and the trimmed means it came from, in
// milliseconds.
type Stage struct {
	Direction                string
	RPM, TCP, TLS, GET, Load float64
}

var sqmkitStage = regexp.MustCompile(`(download|upload): (\d+) RPM on \d+ connections \(\w+ confidence\): TCP ([\d.]+), TLS ([\d.]+), GET ([\d.]+) ms on new connections, ([\d.]+) ms on loaded ones`)

// Stages reads the two directions from `sqmkit test --rpm`'s output.
func Stages(out []byte) ([]Stage, error) {
	ms := sqmkitStage.FindAllSubmatch(out, -1)
	if len(ms) != 2 {
		return nil, fmt.Errorf("sqmkit test --rpm printed %d stages, want download and upload:\n%s", len(ms), out)
	}
	var st []Stage
	for _, m := range ms {
		f := func(i int) float64 { v, _ := strconv.ParseFloat(string(m[i]), 64); return v }
		st = append(st, Stage{Direction: string(m[1]), RPM: f(2), TCP: f(3), TLS: f(4), GET: f(5), Load: f(6)})
	}
	return st, nil
}

// EarlierDraft is the stage's latencies aggregated as goresponsiveness
// does (the draft's earlier text): 60000 over the mean of the foreign and
// the loaded latencies. docs/commands.md, "Responsiveness (RPM)", says why
// sqmkit prints the current text's figure instead.
func (s Stage) EarlierDraft() float64 {
	return 60000 / ((s.Load + (s.TCP+s.TLS+s.GET)/3) / 2)
}

// Theirs is one direction of goresponsiveness's result: its RPM (the
// single-sided trimmed mean; NaN when its last window held no probe) and
// how many load connections it ended with (0: its load generator gave up).
type Theirs struct {
	RPM   float64
	Conns int
}

var theirStage = regexp.MustCompile(`(?s)(Download|Upload):.*?using (\d+) parallel connections.*?RPM:\s+(\S+) \(Single-Sided`)

// Goresponsiveness reads goresponsiveness's download and upload results.
func Goresponsiveness(out []byte) (down, up Theirs, err error) {
	got := map[string]Theirs{}
	for _, m := range theirStage.FindAllSubmatch(out, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		v, err := strconv.ParseFloat(string(m[3]), 64)
		if err != nil {
			return down, up, fmt.Errorf("goresponsiveness's %s RPM %q: %w", m[1], m[3], err)
		}
		got[string(m[1])] = Theirs{RPM: v, Conns: n}
	}
	down, okd := got["Download"]
	up, oku := got["Upload"]
	if !okd || !oku {
		return down, up, fmt.Errorf("goresponsiveness printed no download and upload RPM:\n%s", out)
	}
	return down, up, nil
}
