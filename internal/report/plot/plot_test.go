package plot

import (
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/reporttest"
)

// results covers the default plan, SQM-like numbers, a custom phase plan
// with an unknown phase name, and a run whose probes were all lost.
func results() map[string]*bbresult.Result {
	custom := reporttest.Bloated()
	custom.Phases = []reporttest.Phase{
		{Name: bbresult.PhaseIdleBefore, Seconds: 2},
		{Name: "warmup", Seconds: 3, DownloadMbps: 50, AddedDown: 40},
		{Name: bbresult.PhaseDownload, Seconds: 4, DownloadMbps: 94, AddedDown: 250},
	}
	allLost := reporttest.Bloated()
	allLost.LossRate = 1
	allLost.Phases = allLost.Phases[1:2]
	return map[string]*bbresult.Result{
		"bloated":  reporttest.Result(reporttest.Bloated()),
		"shaped":   reporttest.Result(reporttest.Shaped()),
		"custom":   reporttest.Result(custom),
		"all lost": reporttest.Result(allLost),
	}
}

func TestWritePlotSVG(t *testing.T) {
	for name, r := range results() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.svg")
			if err := WritePlot(path, r); err != nil {
				t.Fatal(err)
			}
			fills, texts := parseSVG(t, path)
			// Every phase is shaded once in each panel.
			bandFills := map[string]bool{}
			for _, ph := range r.Phases {
				c := phaseColor(ph.Name)
				bandFills[fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)] = true
			}
			var shaded int
			for f := range bandFills {
				shaded += fills[f]
			}
			if shaded != 2*len(r.Phases) {
				t.Errorf("%d shaded bands, want 2 per phase = %d (fills %v)", shaded, 2*len(r.Phases), fills)
			}
			for fill := range fills {
				if !validFill.MatchString(fill) {
					t.Errorf("invalid SVG fill %q", fill)
				}
			}
			for _, ph := range r.Phases {
				if texts[ph.Name] < 1 {
					t.Errorf("phase %s not labelled; texts %v", ph.Name, texts)
				}
			}
			title := fmt.Sprintf("grade %s (DSLReports, %.0f ms added)", r.Grades.DSLReports, r.Grades.DSLReportsAddedMs)
			family := ", " + bbresult.FamilyName(r.Family) + ")"
			if !hasPrefixKey(texts, "sqmkit bufferbloat test: "+r.Server) || !hasSubstringKey(texts, family) || !hasSubstringKey(texts, title) {
				t.Errorf("title lacks server, %q or %q: %v", family, title, texts)
			}
		})
	}
}

var validFill = regexp.MustCompile(`^(none|#[0-9A-F]{6})$`)

// parseSVG checks the file is well-formed XML and counts the fill colours
// and text contents it draws.
func parseSVG(t *testing.T, path string) (fills, texts map[string]int) {
	t.Helper()
	fills, texts = map[string]int{}, map[string]int{}
	dec := xml.NewDecoder(reporttest.Open(t, path))
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not valid XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inText = e.Name.Local == "text"
			for _, a := range e.Attr {
				for _, decl := range strings.Split(a.Value, ";") {
					if v, ok := strings.CutPrefix(decl, "fill:"); ok && a.Name.Local == "style" {
						fills[v]++
					}
				}
			}
		case xml.CharData:
			if inText {
				texts[string(e)]++
			}
		case xml.EndElement:
			inText = false
		}
	}
	return fills, texts
}

func hasPrefixKey(m map[string]int, p string) bool {
	for k := range m {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func hasSubstringKey(m map[string]int, s string) bool {
	for k := range m {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func TestWritePlotPNG(t *testing.T) {
	for name, r := range results() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.PNG")
			if err := WritePlot(path, r); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(reporttest.Open(t, path))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			b := img.Bounds()
			if b.Dx() != int(float64(width/vg.Inch)*dpi) || b.Dy() != int(float64(height/vg.Inch)*dpi) {
				t.Fatalf("size %v, want %vx%v", b.Size(), float64(width/vg.Inch)*dpi, float64(height/vg.Inch)*dpi)
			}
			// Each phase's band colour must cover a visible area.
			counts := map[color.RGBA]int{}
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					r, g, bl, a := img.At(x, y).RGBA()
					counts[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}]++
				}
			}
			for _, ph := range r.Phases {
				if n := counts[phaseColor(ph.Name)]; n < 1000 {
					t.Errorf("phase %s: %d pixels of its band colour", ph.Name, n)
				}
			}
			if n := counts[downColor]; n < 100 {
				t.Errorf("download line: %d pixels", n)
			}
		})
	}
}

func TestWritePlotErrors(t *testing.T) {
	dir := t.TempDir()
	r := reporttest.Result(reporttest.Bloated())
	for _, c := range []struct {
		name, path string
		r          *bbresult.Result
		want       string
	}{
		{"extension", filepath.Join(dir, "run.jpg"), r, `extension ".jpg" not supported, use .png or .svg`},
		{"no phases", filepath.Join(dir, "run.png"), &bbresult.Result{}, "no phases"},
		{"no directory", filepath.Join(dir, "missing", "run.svg"), r, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := WritePlot(c.path, c.r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func BenchmarkWritePlotPNG(b *testing.B) {
	r := reporttest.Result(reporttest.Bloated())
	path := filepath.Join(b.TempDir(), "run.png")
	b.ResetTimer()
	for range b.N {
		if err := WritePlot(path, r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSegments(t *testing.T) {
	xy := func(xs ...float64) plotter.XYs {
		out := make(plotter.XYs, len(xs))
		for i, x := range xs {
			out[i].X = x
		}
		return out
	}
	for _, c := range []struct {
		name string
		in   plotter.XYs
		want []int // segment lengths
	}{
		{"empty", nil, nil},
		{"regular", xy(0, 1, 2, 3, 4), []int{5}},
		{"lost probes stay joined", xy(0, 1, 2, 5, 6, 7), []int{6}},
		{"stall splits", xy(0, 1, 2, 3, 10, 11, 12), []int{4, 3}},
		{"two stalls", xy(0, 1, 2, 20, 21, 22, 40, 41), []int{3, 3, 2}},
		{"short", xy(0, 10), []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			for _, s := range segments(c.in) {
				got = append(got, len(s))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("segment lengths %v, want %v", got, c.want)
			}
		})
	}
}

// TestLatencyClip: a few stalls clip the latency axis, and the label states
// exactly where the axis ends.
func TestLatencyClip(t *testing.T) {
	stalled := reporttest.Result(reporttest.Shaped())
	for i := 1; i <= 5; i++ {
		pr := &stalled.Samples.Probes[i*len(stalled.Samples.Probes)/6]
		pr.Lost, pr.RTT = "", 3000
	}
	for name, c := range map[string]struct {
		r       *bbresult.Result
		clipped bool
	}{
		"stalls": {stalled, true},
		"shaped": {reporttest.Result(reporttest.Shaped()), false},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := latencyPanel(c.r)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := strings.CutPrefix(p.Y.Label.Text, "Latency (ms, clipped at ")
			if !c.clipped {
				if ok {
					t.Errorf("label %q on a run without outliers", p.Y.Label.Text)
				}
				return
			}
			at, err := strconv.ParseFloat(strings.TrimSuffix(v, ")"), 64)
			if !ok || err != nil {
				t.Fatalf("label %q does not state the clip", p.Y.Label.Text)
			}
			if at != p.Y.Max || at >= 3000 || at < c.r.Phases[3].Latency.P95 {
				t.Errorf("label says clipped at %v, axis ends at %v (p95 of the loaded phase %v)", at, p.Y.Max, c.r.Phases[3].Latency.P95)
			}
		})
	}
}

func TestCeil2(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{12.65, 13}, {13, 13}, {1.38, 1.4}, {263.4, 270}, {0.123, 0.13}, {1234, 1300},
	} {
		if got := ceil2(c.in); got != c.want {
			t.Errorf("ceil2(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestTimeTicksRound: the time axis is labelled at round seconds (the
// default ticker labelled 2.5, 10, 17.5), at most ten labels, and the
// unlabelled variant draws the same marks without labels.
func TestTimeTicksRound(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		want     []string
	}{
		{0, 20, []string{"0", "2", "4", "6", "8", "10", "12", "14", "16", "18", "20"}},
		{0, 40, []string{"0", "5", "10", "15", "20", "25", "30", "35", "40"}},
		{0.3, 9.7, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}},
		{0, 185, []string{"0", "20", "40", "60", "80", "100", "120", "140", "160", "180"}},
	} {
		var labels []string
		for _, tk := range (seconds{labels: true}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) > 11 {
			t.Errorf("[%v, %v]: %d labels", c.min, c.max, len(labels))
		}
		for _, l := range labels {
			if strings.Contains(l, ".") {
				t.Errorf("[%v, %v]: label %q is not a round second", c.min, c.max, l)
			}
		}
		if len(c.want) > 0 && !slices.Equal(labels, c.want) {
			t.Errorf("[%v, %v]: labels %q, want %q", c.min, c.max, labels, c.want)
		}
		for _, tk := range (seconds{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				t.Errorf("the unlabelled axis has label %q", tk.Label)
			}
		}
	}
}

// TestBackfillStall: a stall and the burst that ends it (a 40 Mbit/s
// link's application reads 0 for 0.4 s, then 200 Mbit/s in one 100 ms
// sample) plot at the link's rate, each phase keeps its bytes, and the
// idle phase before takes none.
func TestBackfillStall(t *testing.T) {
	phases := []bbresult.Phase{{Name: "idle", Start: 0, End: 2}, {Name: "download", Start: 2, End: 12}}
	var xy plotter.XYs
	for i := 1; i <= 120; i++ {
		x, y := float64(i)/10, 40.0
		switch {
		case x <= 2.05:
			y = 0
		case x > 6 && x <= 6.45:
			y = 0
		case x > 6.45 && x <= 6.55:
			y = 200
		case i%2 == 0:
			y = 38 // the sawtooth under the usual rate
		}
		xy = append(xy, plotter.XY{X: x, Y: y})
	}
	got := backfill(xy, phases)
	var peak, before, after float64
	for i, p := range got {
		if p.X <= 2 {
			if p.Y != 0 {
				t.Errorf("idle sample at %.1f s reads %.1f", p.X, p.Y)
			}
			continue
		}
		peak = max(peak, p.Y)
		before, after = before+xy[i].Y, after+p.Y
	}
	if peak > 40 {
		t.Errorf("peak %.1f Mbit/s on a 40 Mbit/s link", peak)
	}
	if math.Abs(before-after) > 1e-9 {
		t.Errorf("the download's bytes went from %.1f to %.1f", before, after)
	}
	if !slices.Equal(backfill(xy[:5], phases), xy[:5]) {
		t.Error("a phase of a few samples changed")
	}
}
