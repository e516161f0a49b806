package flent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

func specs() map[string]reporttest.Spec {
	return map[string]reporttest.Spec{"bloated": reporttest.Bloated(), "shaped": reporttest.Shaped()}
}

// decode reads a file written by WriteFlent back as generic JSON.
func decode(t *testing.T, path string) *file {
	t.Helper()
	zr, err := gzip.NewReader(reporttest.Open(t, path))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	var out file
	if err := json.NewDecoder(zr).Decode(&out); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return &out
}

func TestWriteFlentStructure(t *testing.T) {
	for name, spec := range specs() {
		t.Run(name, func(t *testing.T) {
			r := reporttest.Result(spec)
			path := filepath.Join(t.TempDir(), "run.flent.gz")
			if err := WriteFlent(path, r); err != nil {
				t.Fatal(err)
			}
			f := decode(t, path)
			if f.Version != 4 || f.Metadata["NAME"] != "rrul" || f.Metadata["DATA_FILENAME"] != "run.flent.gz" {
				t.Errorf("version %d, metadata %v", f.Version, f.Metadata)
			}
			total := r.Phases[len(r.Phases)-1].End
			if got := f.XValues[len(f.XValues)-1]; math.Abs(got-total) > stepSize {
				t.Errorf("grid ends at %v, run at %v", got, total)
			}
			for s, ys := range f.Results {
				if len(ys) != len(f.XValues) {
					t.Errorf("%s: %d values for %d x values", s, len(ys), len(f.XValues))
				}
			}
			t0 := float64(r.Started.Unix())
			for s, rv := range f.RawValues {
				for _, v := range rv {
					if v.T < t0 || v.T > t0+total+1 {
						t.Fatalf("%s: raw time %v outside the run starting at %v", s, v.T, t0)
					}
				}
			}
			// The per-class split must add back up to the measured totals.
			for i, s := range r.Samples.Throughput {
				var down float64
				for _, c := range classes {
					down += f.RawValues["TCP download "+c][i].Val
				}
				if math.Abs(down-s.Download) > 1e-9 {
					t.Fatalf("sample %d: classes sum to %v, measured %v", i, down, s.Download)
				}
			}
		})
	}
}

// TestSeriesAreRRUL checks every series written against flent's own rrul
// definition, when flent is installed.
func TestSeriesAreRRUL(t *testing.T) {
	conf, err := os.ReadFile("/usr/share/flent/flent/tests/rrul.conf")
	if err != nil {
		tctest.Missing(t, "flent's rrul.conf not installed: %v", err)
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*\('([^']+)',\s*$`).FindAllStringSubmatch(string(conf), -1) {
		defined[m[1]] = true
	}
	if !defined["TCP download BE"] || !defined["Ping (ms) ICMP"] {
		t.Fatalf("could not parse rrul.conf: found %v", defined)
	}
	f := build("run.flent.gz", reporttest.Result(reporttest.Shaped()))
	for s := range f.Results {
		if !defined[s] {
			t.Errorf("series %q is not one of rrul's", s)
		}
	}
	for s := range f.RawValues {
		if _, ok := f.Results[s]; !ok {
			t.Errorf("raw series %q has no results", s)
		}
	}
}

func TestOnGrid(t *testing.T) {
	const t0 = 1000.0
	p := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name string
		rv   []raw
		x    []float64
		want []*float64
	}{
		{"interpolate", []raw{{t0 + 0.1, 10}, {t0 + 0.5, 50}}, []float64{0, 0.2, 0.4, 0.6},
			[]*float64{p(10), p(20), p(40), p(50)}},
		{"exact hit", []raw{{t0, 1}, {t0 + 0.2, 3}}, []float64{0, 0.2}, []*float64{p(1), p(3)}},
		{"gap too long", []raw{{t0, 1}, {t0 + 3, 4}}, []float64{0, 1.4, 2.2, 3}, []*float64{p(1), nil, nil, p(4)}},
		{"far from any sample", []raw{{t0 + 2, 5}}, []float64{0, 1, 2}, []*float64{nil, nil, p(5)}},
		{"no samples", nil, []float64{0, 0.2}, []*float64{nil, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := onGrid(c.rv, t0, c.x)
			for i := range c.want {
				switch {
				case (got[i] == nil) != (c.want[i] == nil):
					t.Errorf("x=%v: got %v, want %v", c.x[i], fmtp(got[i]), fmtp(c.want[i]))
				case got[i] != nil && math.Abs(*got[i]-*c.want[i]) > 1e-9:
					t.Errorf("x=%v: got %v, want %v", c.x[i], *got[i], *c.want[i])
				}
			}
		})
	}
}

func fmtp(v *float64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func TestWriteFlentErrors(t *testing.T) {
	dir := t.TempDir()
	r := reporttest.Result(reporttest.Bloated())
	for _, c := range []struct {
		name, path string
		r          *bbresult.Result
		want       string
	}{
		{"suffix", filepath.Join(dir, "run.json.gz"), r, "must end in .flent.gz"},
		{"no phases", filepath.Join(dir, "run.flent.gz"), &bbresult.Result{}, "no phases"},
		{"no directory", filepath.Join(dir, "missing", "run.flent.gz"), r, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := WriteFlent(c.path, c.r); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// flent runs the real flent on a file, in a scratch HOME with a headless
// matplotlib, and returns its standard output.
func flent(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("flent", args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "MPLBACKEND=Agg")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("flent %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

type summaryRow struct {
	mean, median, p99 float64
	n                 int
}

// parseSummary reads flent's summary table:
//
//	Ping (ms) UDP BE :       177.85       115.38       398.92 ms     3967
func parseSummary(t *testing.T, out string) map[string]summaryRow {
	t.Helper()
	rows := map[string]summaryRow{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " : ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 5 {
			t.Fatalf("unexpected summary row %q", sc.Text())
		}
		var vals [3]float64
		for i := range vals {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				t.Fatalf("row %q: %v", sc.Text(), err)
			}
			vals[i] = v
		}
		n, err := strconv.Atoi(f[4])
		if err != nil {
			t.Fatalf("row %q: %v", sc.Text(), err)
		}
		rows[strings.TrimSpace(name)] = summaryRow{vals[0], vals[1], vals[2], n}
	}
	return rows
}

// TestFlentReadsExport is the end-to-end check: the real flent must plot
// the file and summarise it to the numbers sqmkit measured.
func TestFlentReadsExport(t *testing.T) {
	if _, err := exec.LookPath("flent"); err != nil {
		tctest.Missing(t, "flent not installed (scripts/deps.sh installs it)")
	}
	for name, spec := range specs() {
		for _, perStream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/perstream=%v", name, perStream), func(t *testing.T) {
				flentReadsExport(t, spec, perStream)
			})
		}
	}
}

// flentReadsExport exports one run, with or without per-stream samples
// (older files have none), and checks flent's plot and statistics.
func flentReadsExport(t *testing.T, spec reporttest.Spec, perStream bool) {
	r := reporttest.Result(spec)
	if !perStream {
		for i := range r.Samples.Throughput {
			r.Samples.Throughput[i].DownloadStreams = nil
			r.Samples.Throughput[i].UploadStreams = nil
		}
	}
	if PerStream(r) != perStream {
		t.Fatalf("PerStream = %v, want %v", PerStream(r), perStream)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "run.flent.gz")
	if err := WriteFlent(path, r); err != nil {
		t.Fatal(err)
	}

	pngPath := filepath.Join(dir, "out.png")
	flent(t, "-i", path, "-p", "all_scaled", "-o", pngPath)
	img, err := png.Decode(reporttest.Open(t, pngPath))
	if err != nil || img.Bounds().Dx() < 300 || img.Bounds().Dy() < 200 {
		t.Fatalf("flent's plot: err %v, image %v", err, img)
	}

	rows := parseSummary(t, flent(t, "-i", path, "-f", "summary"))
	var rtt, down, up, both []float64
	for _, p := range r.Samples.Probes {
		if p.Lost == "" {
			rtt = append(rtt, p.RTT)
		}
	}
	for _, s := range r.Samples.Throughput {
		down, up, both = append(down, s.Download), append(up, s.Upload), append(both, s.Download+s.Upload)
	}
	// Class i is stream i when streams were recorded (0 while the
	// direction is idle), else a quarter of the total.
	class := func(i int, down bool) []float64 {
		var out []float64
		for _, s := range r.Samples.Throughput {
			total, per := s.Upload, s.UploadStreams
			if down {
				total, per = s.Download, s.DownloadStreams
			}
			switch {
			case !perStream:
				out = append(out, total/4)
			case per == nil:
				out = append(out, 0)
			default:
				out = append(out, per[i])
			}
		}
		return out
	}
	// Raw series: flent's statistics must equal ours to the two
	// decimals it prints.
	for _, c := range []struct {
		series string
		vals   []float64
	}{
		{"Ping (ms) UDP BE", rtt},
		{"TCP download BE", class(0, true)},
		{"TCP download BK", class(1, true)},
		{"TCP download EF", class(3, true)},
		{"TCP upload CS5", class(2, false)},
	} {
		got, ok := rows[c.series]
		want := summaryRow{mean(c.vals), median(c.vals), pct99(c.vals), len(c.vals)}
		if !ok || got.n != want.n || !near(got.mean, want.mean, 0.006) ||
			!near(got.median, want.median, 0.006) || !near(got.p99, want.p99, 0.006) {
			t.Errorf("%s: flent says %+v, sqmkit measured %+v", c.series, got, want)
		}
	}
	// Computed series live on flent's 0.2 s grid, so their means
	// match the measured ones only as closely as the grid samples
	// the run.
	for _, c := range []struct {
		series string
		want   float64
	}{
		{"TCP download sum", mean(down)},
		{"TCP upload sum", mean(up)},
		{"TCP totals", mean(both)},
		{"Ping (ms) avg", mean(rtt)},
	} {
		if got, ok := rows[c.series]; !ok || !near(got.mean, c.want, 0.03*c.want) {
			t.Errorf("%s: flent mean %v, sqmkit measured %v", c.series, got.mean, c.want)
		}
	}
	if _, ok := rows["Ping (ms) ICMP"]; ok {
		t.Error("ICMP pings exported, but sqmkit sends none")
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// pct99 is numpy's default (linear) percentile, which flent uses.
func pct99(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	pos := 0.99 * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[i]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}
