// Package plot draws a bufferbloat test as an RRUL-style figure: goodput
// down and up over time above latency over time, the test's phases shaded
// behind both, so the moment a queue fills is visible at a glance.
package plot

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

const (
	// gapFactor: a few lost probes in a row still read as one line; a
	// stall of more than five sample intervals shows as a gap.
	gapFactor = 5

	width  = 11 * vg.Inch
	height = 7 * vg.Inch
	dpi    = 120
)

var (
	downColor = color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	upColor   = color.RGBA{R: 0xe0, G: 0x6c, B: 0x00, A: 0xff}
	rttColor  = color.RGBA{R: 0x20, G: 0x20, B: 0x20, A: 0xff}
	inflowCol = color.RGBA{R: 0xb0, G: 0x10, B: 0x60, A: 0xff}

	// phaseColors tint each phase; loaded phases get the colour of the
	// direction they load so the bands read like the lines.
	phaseColors = map[string]color.RGBA{
		bbresult.PhaseIdleBefore: {R: 0xee, G: 0xee, B: 0xee, A: 0xff},
		bbresult.PhaseDownload:   {R: 0xdd, G: 0xe8, B: 0xfa, A: 0xff},
		bbresult.PhaseUpload:     {R: 0xfc, G: 0xe8, B: 0xd4, A: 0xff},
		bbresult.PhaseBidir:      {R: 0xea, G: 0xe0, B: 0xf4, A: 0xff},
		bbresult.PhaseIdleAfter:  {R: 0xee, G: 0xee, B: 0xee, A: 0xff},
	}
	otherPhase = color.RGBA{R: 0xe4, G: 0xf2, B: 0xe4, A: 0xff}
)

// WritePlot renders r to path, as PNG or SVG by the file's extension.
func WritePlot(path string, r *bbresult.Result) error {
	return write(path, func(c vg.CanvasSizer) error { return draw1(c, r) })
}

// write renders one figure drawn by draw to path, PNG or SVG by extension.
func write(path string, draw func(vg.CanvasSizer) error) error {
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))}
	case ".svg":
		c = vgsvg.New(width, height)
	default:
		return fmt.Errorf("plot file %s: extension %q not supported, use .png or .svg", path, ext)
	}
	if err := draw(c); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

// draw1 draws the whole figure: title, then the two panels aligned so
// their time axes line up.
func draw1(c vg.CanvasSizer, r *bbresult.Result) error {
	if len(r.Phases) == 0 {
		return fmt.Errorf("result has no phases to plot")
	}
	top, err := throughputPanel(r)
	if err != nil {
		return err
	}
	bottom, err := latencyPanel(r)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	title := draw.TextStyle{Color: color.Black, Font: sans(13), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	lines := titleLines(r)
	face := plot.DefaultTextHandler.Cache().Lookup(title.Font, title.Font.Size)
	lineH := face.Extents().Height
	for i, l := range lines {
		dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Length(i)*lineH*1.1 - 4}, l)
		title.Font = sans(10)
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: lineH*vg.Length(len(lines))*1.1 + 10, PadBottom: 4, PadLeft: 4, PadRight: 12, PadY: 8}
	cs := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(cs[0][0])
	bottom.Draw(cs[1][0])
	return nil
}

func titleLines(r *bbresult.Result) []string {
	return []string{
		fmt.Sprintf("sqmkit bufferbloat test: %s (%s, %s)", r.Server, r.ServerAddr, bbresult.FamilyName(r.Family)),
		fmt.Sprintf("%s · idle RTT %s ms · %d streams/direction · grade %s (DSLReports, %s ms added) · %s (p95, %s ms added)",
			r.Started.UTC().Format("2006-01-02 15:04 UTC"), bbresult.Fixed(r.IdleRTT, 2), r.Streams,
			cmp.Or(r.Grades.DSLReports, "-"), bbresult.Fixed(r.Grades.DSLReportsAddedMs, 0), cmp.Or(r.Grades.Percentile, "-"), bbresult.Fixed(r.Grades.PercentileAddedMs, 0)),
	}
}

func throughputPanel(r *bbresult.Result) (*plot.Plot, error) {
	p := newPanel(r, "Goodput (Mbit/s)", true)
	p.X.Tick.Marker = seconds{} // the panel below labels the shared time axis
	var down, up plotter.XYs
	for _, s := range r.Samples.Throughput {
		down = append(down, plotter.XY{X: s.T, Y: s.Download})
		up = append(up, plotter.XY{X: s.T, Y: s.Upload})
	}
	down, up = backfill(down, r.Phases), backfill(up, r.Phases)
	scaleY(p, false, down, up)
	if err := addLine(p, down, downColor, 1.5, "download"); err != nil {
		return nil, err
	}
	if err := addLine(p, up, upColor, 1.5, "upload"); err != nil {
		return nil, err
	}
	return p, nil
}

// backfill gives the bytes a sample read above its phase's usual rate
// back to the samples of the catchUp seconds before it that read less.
// Goodput is what the application reads, and TCP holds a stream's bytes
// back while a retransmission fills a hole, then hands them over at once:
// a 100 ms sample after a stall read five times a 40 Mbit/s link. Those
// bytes crossed the link during the stall, so that is where the panel
// shows them; each phase's bytes stay its own (TestBackfillStall). The
// usual rate is the phase's 90th percentile, under a spike and over the
// sawtooth.
func backfill(xy plotter.XYs, phases []bbresult.Phase) plotter.XYs {
	out := slices.Clone(xy)
	for _, ph := range phases {
		from := sort.Search(len(out), func(i int) bool { return out[i].X > ph.Start })
		to := sort.Search(len(out), func(i int) bool { return out[i].X > ph.End })
		in := out[from:to]
		if len(in) < 10 {
			continue
		}
		ys := make([]float64, len(in))
		for i, p := range in {
			ys[i] = p.Y
		}
		slices.Sort(ys)
		usual := ys[len(ys)*9/10]
		for i := range in {
			for j := i - 1; j >= 0 && in[i].Y > usual && in[j].X >= in[i].X-catchUp; j-- {
				moved := min(in[i].Y-usual, max(0, usual-in[j].Y))
				in[i].Y -= moved
				in[j].Y += moved
			}
		}
	}
	return out
}

// catchUp is how far back, in seconds, backfill looks for a stall: longer
// than the stalls a lost packet's recovery takes at broadband RTTs.
const catchUp = 2.0

func latencyPanel(r *bbresult.Result) (*plot.Plot, error) {
	p := newPanel(r, "Latency (ms)", false)
	p.X.Label.Text = "Time (s)"
	var rtt, up, down, inflow plotter.XYs
	for _, pr := range r.Samples.Probes {
		if pr.Lost != "" {
			continue
		}
		rtt = append(rtt, plotter.XY{X: pr.T, Y: pr.RTT})
		up = append(up, plotter.XY{X: pr.T, Y: pr.Up})
		down = append(down, plotter.XY{X: pr.T, Y: pr.Down})
	}
	for _, s := range r.Samples.InFlow {
		inflow = append(inflow, plotter.XY{X: s.T, Y: s.RTT})
	}
	for _, l := range []struct {
		xy    plotter.XYs
		c     color.Color
		w     vg.Length
		label string
	}{
		// the direction's own colour, as in the goodput panel above: the
		// light shades were too faint to read against the grid
		{down, downColor, 1.0, "one-way down"},
		{up, upColor, 1.0, "one-way up"},
		{rtt, rttColor, 1.2, "UDP probe RTT"},
	} {
		if err := addLine(p, l.xy, l.c, l.w, l.label); err != nil {
			return nil, err
		}
	}
	if len(inflow) > 0 {
		s, err := plotter.NewScatter(inflow)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: inflowCol, Radius: 1.8, Shape: draw.CircleGlyph{}}
		p.Add(s)
		p.Legend.Add("in-flow TCP request", s)
	}
	if limit := scaleY(p, true, rtt, inflow, up, down); limit > 0 {
		p.Y.Label.Text = "Latency (ms, clipped at " + strconv.FormatFloat(limit, 'f', -1, 64) + ")"
	}
	return p, nil
}

// scaleY leaves 15% headroom above the data so the phase labels and the
// legend sit clear of it. For latency it also keeps a few huge outliers (a
// 3 s stall) from flattening the rest: the axis then ends a little above the
// 99.5th percentile, at a two-digit value the label can state exactly.
func scaleY(p *plot.Plot, clipOutliers bool, series ...plotter.XYs) (clippedAt float64) {
	var ys []float64
	for _, s := range series {
		for _, xy := range s {
			ys = append(ys, xy.Y)
		}
	}
	if len(ys) == 0 {
		return 0
	}
	slices.Sort(ys)
	top := ys[len(ys)-1]
	if limit := 1.2 * ys[int(0.995*float64(len(ys)-1))]; clipOutliers && top > 1.5*limit {
		p.Y.Max = ceil2(1.15 * limit)
		return p.Y.Max
	}
	p.Y.Max = 1.15 * top
	return 0
}

// ceil2 rounds v > 0 up to two significant digits (12.65 → 13, 1.38 → 1.4),
// dividing by powers of ten where it can so the result prints exactly.
func ceil2(v float64) float64 {
	e := math.Floor(math.Log10(v)) - 1
	if e >= 0 {
		m := math.Pow(10, e)
		return math.Ceil(v/m) * m
	}
	m := math.Pow(10, -e)
	return math.Ceil(v*m) / m
}

func newPanel(r *bbresult.Result, ylabel string, labels bool) *plot.Plot {
	p := plot.New()
	for _, s := range []*draw.TextStyle{&p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		s.Font = sans(10)
	}
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker, p.Y.Tick.Marker = seconds{labels: true}, compact{}
	p.Y.Min = 0
	p.X.Min = r.Phases[0].Start
	p.X.Max = r.Phases[len(r.Phases)-1].End
	p.Add(&bands{phases: r.Phases, labels: labels})
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = 6
	p.Legend.YOffs = -16 // below the phase labels
	p.Legend.ThumbnailWidth = 18
	return p
}

// addLine draws xy as one line per stretch of regular samples: a straight
// segment across a stall or an outage would claim values nobody measured.
func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, w vg.Length, label string) error {
	for i, seg := range segments(xy) {
		l, err := plotter.NewLine(seg)
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		l.Color, l.Width = c, w
		p.Add(l)
		if i == 0 {
			p.Legend.Add(label, l)
		}
	}
	return nil
}

// segments splits xy wherever the time step exceeds gapFactor times the
// median step.
func segments(xy plotter.XYs) []plotter.XYs {
	if len(xy) < 3 {
		if len(xy) == 0 {
			return nil
		}
		return []plotter.XYs{xy}
	}
	steps := make([]float64, len(xy)-1)
	for i := range steps {
		steps[i] = xy[i+1].X - xy[i].X
	}
	slices.Sort(steps)
	limit := gapFactor * steps[len(steps)/2]
	var out []plotter.XYs
	start := 0
	for i := 1; i < len(xy); i++ {
		if xy[i].X-xy[i-1].X > limit {
			out = append(out, xy[start:i])
			start = i
		}
	}
	return append(out, xy[start:])
}

func sans(size vg.Length) font.Font {
	f := plot.DefaultFont
	f.Variant = "Sans"
	f.Size = size
	return f
}

// bands shades each phase across the full height of a panel and, when
// labels is set, names it at the top.
type bands struct {
	phases []bbresult.Phase
	labels bool
}

func (b *bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := draw.TextStyle{Color: color.Gray{Y: 0x50}, Font: sans(9), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	for _, ph := range b.phases {
		x0, x1 := trX(ph.Start), trX(ph.End)
		rect := c.ClipPolygonX([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		c.FillPolygon(phaseColor(ph.Name), rect)
		if b.labels {
			c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: c.Max.Y - 3}, ph.Name)
		}
	}
}

func (b *bands) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, ph := range b.phases {
		xmin, xmax = math.Min(xmin, ph.Start), math.Max(xmax, ph.End)
	}
	return xmin, xmax, 0, 0
}

func phaseColor(name string) color.RGBA {
	if c, ok := phaseColors[name]; ok {
		return c
	}
	return otherPhase
}

// compact labels ticks with as few digits as they need ("50000", "2.5"):
// the default prints every label with the most decimals any one needs.
type compact struct{}

func (compact) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// seconds ticks a time axis at round seconds: major ticks every 1, 2, 5,
// 10, 15, 20, 30 or 60 s (or a multiple of a minute), whichever gives at
// most ten, with four minor ticks between; labels only when labels is set
// (the default ticker labelled 2.5, 10, 17.5; TestTimeTicksRound).
type seconds struct{ labels bool }

func (s seconds) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	step := 60.0
	for _, c := range []float64{1, 2, 5, 10, 15, 20, 30, 60} {
		if span/c <= 10 {
			step = c
			break
		}
	}
	for span/step > 10 {
		step += 60
	}
	var ts []plot.Tick
	minor := step / 5
	for v := math.Ceil(lo/minor) * minor; v <= hi+1e-9; v += minor {
		t := plot.Tick{Value: v}
		if r := math.Round(v / step); s.labels && math.Abs(v-r*step) < 1e-6 {
			t.Label = strconv.FormatFloat(r*step, 'f', -1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}
