// Package flent exports a bufferbloat test as a flent data file, so the
// plots and comparisons flent users know work on sqmkit runs.
//
// flent only loads files named after one of its own tests and plots only the
// series that test defines, so the export poses as an rrul run: one
// bidirectional test with four TCP streams per direction in the BE, BK, CS5
// and EF classes plus UDP and ICMP pings. sqmkit's run maps onto it as:
//
//   - the whole timeline, every phase, is the rrul run (phase bounds are in
//     the SQMKIT_PHASES metadata and the NOTE);
//   - TCP download/upload BE, BK, CS5, EF: with 4 streams per direction,
//     stream i's measured goodput goes to class i. sqmkit marks no DSCP, so
//     the class names are positional labels; the sums are the measured
//     totals. With another stream count, or a file without per-stream
//     values, each class holds a quarter of the total, and the NOTE and
//     TITLE say so;
//   - Ping (ms) UDP BE: sqmkit's UDP probe round trips (lost probes omitted);
//   - Ping (ms) UDP BK, UDP EF and ICMP are left out: sqmkit sends no such
//     probes, and flent plots the series that are present.
package flent

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

const (
	// formatVersion is flent's data file format version (flent 2.x).
	formatVersion = 4
	// stepSize is flent's default interpolation step, in seconds.
	stepSize = 0.2
	// maxGap is how far from a sample flent interpolates (5 steps);
	// beyond the first and last sample it repeats them for half a step.
	// The nanosecond of slack absorbs rounding in absolute Unix times.
	maxGap  = 5*stepSize + 1e-9
	edgeGap = stepSize/2 + 1e-9
	// timeLayout is how flent writes UTC timestamps.
	timeLayout = "2006-01-02T15:04:05.000000Z"
)

// classes are rrul's four DSCP classes per direction.
var classes = []string{"BE", "BK", "CS5", "EF"}

// Series names as flent's rrul test defines them.
const (
	pingUDPBE    = "Ping (ms) UDP BE"
	pingAvg      = "Ping (ms) avg"
	downloadSum  = "TCP download sum"
	uploadSum    = "TCP upload sum"
	downloadAvg  = "TCP download avg"
	uploadAvg    = "TCP upload avg"
	tcpTotals    = "TCP totals"
	unitsMbits   = "Mbits/s"
	unitsMs      = "ms"
	sqmkitPhases = "SQMKIT_PHASES"
)

// file is the top level of a flent data file.
type file struct {
	Version   int                   `json:"version"`
	XValues   []float64             `json:"x_values"`
	Results   map[string][]*float64 `json:"results"`
	RawValues map[string][]raw      `json:"raw_values"`
	Metadata  map[string]any        `json:"metadata"`
}

// raw is one measurement: an absolute Unix time and a value.
type raw struct {
	T   float64 `json:"t"`
	Val float64 `json:"val"`
}

// WriteFlent writes r to path as a gzip-compressed flent rrul data file;
// flent expects the name to end in .flent.gz.
func WriteFlent(path string, r *bbresult.Result) error {
	if !strings.HasSuffix(path, ".flent.gz") {
		return fmt.Errorf("flent file %s: name must end in .flent.gz, flent reads nothing else", path)
	}
	if len(r.Phases) == 0 {
		return fmt.Errorf("flent file %s: result has no phases", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, filepath.Base(path), r); err != nil {
		f.Close()
		return fmt.Errorf("flent file %s: %w", path, err)
	}
	return f.Close()
}

func write(w io.Writer, name string, r *bbresult.Result) error {
	zw := gzip.NewWriter(w)
	if err := json.NewEncoder(zw).Encode(build(name, r)); err != nil {
		return err
	}
	return zw.Close()
}

// build maps r onto rrul's series: raw values for the measured ones, and
// values on flent's time grid for all, including those flent computes
// (sums and averages), so other readers of the file get them too.
func build(name string, r *bbresult.Result) *file {
	t0 := float64(r.Started.UnixNano()) / 1e9
	total := r.Phases[len(r.Phases)-1].End
	f := &file{
		Version:   formatVersion,
		Results:   map[string][]*float64{},
		RawValues: map[string][]raw{},
	}
	for i := 0; float64(i)*stepSize <= total+1e-9; i++ {
		f.XValues = append(f.XValues, float64(i)*stepSize)
	}
	meta := map[string]map[string]string{}
	add := func(series string, rv []raw, units string) {
		f.RawValues[series] = rv
		f.Results[series] = onGrid(rv, t0, f.XValues)
		meta[series] = map[string]string{"UNITS": units}
	}

	perStream := PerStream(r)
	down, up := make([][]raw, len(classes)), make([][]raw, len(classes))
	for _, s := range r.Samples.Throughput {
		for i := range classes {
			down[i] = append(down[i], raw{t0 + s.T, classValue(perStream, s.Download, s.DownloadStreams, i)})
			up[i] = append(up[i], raw{t0 + s.T, classValue(perStream, s.Upload, s.UploadStreams, i)})
		}
	}
	var ping []raw
	for _, p := range r.Samples.Probes {
		if p.Lost == "" {
			ping = append(ping, raw{t0 + p.T, p.RTT})
		}
	}
	var downs, ups []string
	for i, c := range classes {
		downs, ups = append(downs, "TCP download "+c), append(ups, "TCP upload "+c)
		add("TCP download "+c, down[i], unitsMbits)
		add("TCP upload "+c, up[i], unitsMbits)
	}
	add(pingUDPBE, ping, unitsMs)

	computed := func(series string, units string, combine func([]float64) float64, from ...string) {
		f.Results[series] = combineGrid(f.Results, combine, from)
		meta[series] = map[string]string{"UNITS": units}
	}
	computed(downloadSum, unitsMbits, sum, downs...)
	computed(uploadSum, unitsMbits, sum, ups...)
	computed(downloadAvg, unitsMbits, mean, downs...)
	computed(uploadAvg, unitsMbits, mean, ups...)
	computed(tcpTotals, unitsMbits, sum, append(downs, ups...)...)
	computed(pingAvg, unitsMs, mean, pingUDPBE)

	f.Metadata = metadata(name, r, total, meta)
	return f
}

func metadata(name string, r *bbresult.Result, total float64, seriesMeta map[string]map[string]string) map[string]any {
	ipVersion := 4
	if r.Family == "ipv6" {
		ipVersion = 6
	}
	type phase struct {
		Name  string  `json:"name"`
		Start float64 `json:"start_s"`
		End   float64 `json:"end_s"`
	}
	var phases []phase
	var bounds []string
	for _, p := range r.Phases {
		phases = append(phases, phase{p.Name, p.Start, p.End})
		bounds = append(bounds, fmt.Sprintf("%s %.0f-%.0f s", p.Name, p.Start, p.End))
	}
	started := r.Started.UTC().Format(timeLayout)
	return map[string]any{
		"NAME": "rrul",
		// flent prints TITLE under every plot title: say there what the
		// series are; NOTE has the full mapping.
		"TITLE":      fmt.Sprintf("sqmkit %s %s grade %s, all phases, %s", r.Server, r.Family, r.Grades.DSLReports, classTitle(r)),
		"NOTE":       note(r, bounds),
		"TIME":       started,
		"T0":         started,
		"HOST":       r.Server,
		"HOSTS":      []string{r.Server},
		"LOCAL_HOST": localHost(),
		// flent writes these for runs outside a batch; its plotters look
		// them up.
		"BATCH_NAME":    nil,
		"BATCH_TIME":    nil,
		"BATCH_TITLE":   nil,
		"BATCH_UUID":    nil,
		"LENGTH":        int(math.Ceil(total)),
		"TOTAL_LENGTH":  total,
		"STEP_SIZE":     stepSize,
		"IP_VERSION":    ipVersion,
		"DATA_FILENAME": name,
		"SERIES_META":   seriesMeta,
		"TEST_PARAMETERS": map[string]string{
			"sqmkit_tool":        r.Tool,
			"sqmkit_server_addr": r.ServerAddr,
			"sqmkit_streams":     fmt.Sprint(r.Streams),
		},
		sqmkitPhases: phases,
	}
}

// PerStream reports whether r's class series are measured streams: four
// streams per direction (rrul's four classes) with per-stream samples.
func PerStream(r *bbresult.Result) bool {
	if r.Streams != len(classes) {
		return false
	}
	for _, s := range r.Samples.Throughput {
		if len(s.DownloadStreams) == len(classes) || len(s.UploadStreams) == len(classes) {
			return true
		}
	}
	return false
}

// classValue is class i's goodput in one sample: stream i's when measured
// (0 while the direction is idle), else a quarter of the total.
func classValue(perStream bool, total float64, streams []float64, i int) float64 {
	if !perStream {
		return total / float64(len(classes))
	}
	if i < len(streams) {
		return streams[i]
	}
	return 0
}

// localHost names the machine that ran the test, as flent records it.
func localHost() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

func classTitle(r *bbresult.Result) string {
	if PerStream(r) {
		return "TCP classes = streams 1-4 (no DSCP)"
	}
	return "TCP classes = total/4"
}

func note(r *bbresult.Result, bounds []string) string {
	classes := fmt.Sprintf("TCP <dir> BE/BK/CS5/EF each hold a quarter of sqmkit's total goodput in that "+
		"direction (%d streams; per-stream rates not recorded for 4 streams), so only the sums are "+
		"measurements.", r.Streams)
	if PerStream(r) {
		classes = "TCP <dir> BE, BK, CS5, EF are sqmkit's streams 1, 2, 3, 4 of that direction, each " +
			"measured. sqmkit does not mark DSCP: all streams are best effort and the class names are " +
			"positional labels only."
	}
	return fmt.Sprintf("Exported by %s from a sqmkit bufferbloat test against %s (%s), %s. "+
		"Phases: %s. %s Ping (ms) UDP BE holds sqmkit's UDP probe RTTs; there are no UDP BK/EF or ICMP "+
		"pings. Grades: DSLReports %s (%s ms added), p95 %s (%s ms added), idle RTT %s ms (baseline: idle_before).",
		r.Tool, r.Server, r.ServerAddr, r.Family, strings.Join(bounds, ", "), classes,
		r.Grades.DSLReports, bbresult.Fixed(r.Grades.DSLReportsAddedMs, 1), r.Grades.Percentile, bbresult.Fixed(r.Grades.PercentileAddedMs, 1), bbresult.Fixed(r.IdleRTT, 2))
}

// onGrid interpolates rv linearly onto the grid x (seconds since t0), as
// flent does when it aggregates a run: a grid point gets a value when
// samples lie on both sides of it within maxGap, or, before the first and
// after the last sample, one lies within edgeGap; elsewhere it is null.
func onGrid(rv []raw, t0 float64, x []float64) []*float64 {
	out := make([]*float64, len(x))
	j := 0
	for i, xt := range x {
		t := t0 + xt
		for j < len(rv) && rv[j].T <= t {
			j++
		}
		// rv[j-1] is the last sample at or before t, rv[j] the first after.
		var v float64
		switch {
		case j > 0 && j < len(rv) && t-rv[j-1].T <= maxGap && rv[j].T-t <= maxGap:
			a, b := rv[j-1], rv[j]
			v = a.Val + (b.Val-a.Val)*(t-a.T)/(b.T-a.T)
		case j > 0 && t-rv[j-1].T <= edgeGap:
			v = rv[j-1].Val
		case j < len(rv) && rv[j].T-t <= edgeGap:
			v = rv[j].Val
		default:
			continue
		}
		out[i] = &v
	}
	return out
}

// combineGrid combines the named series point by point, skipping nulls, as
// flent's computed series (sum, average) do.
func combineGrid(results map[string][]*float64, combine func([]float64) float64, from []string) []*float64 {
	n := len(results[from[0]])
	out := make([]*float64, n)
	for i := range n {
		var vs []float64
		for _, s := range from {
			if v := results[s][i]; v != nil {
				vs = append(vs, *v)
			}
		}
		if len(vs) > 0 {
			v := combine(vs)
			out[i] = &v
		}
	}
	return out
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

func mean(vs []float64) float64 { return sum(vs) / float64(len(vs)) }
