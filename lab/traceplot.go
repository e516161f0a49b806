package main

// The trace scenario's plot: capacity, each controller's rates, and the
// delay each added (lab/README.md, "Capacity traces").

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/trace"
)

// traceRun is one controller's run, for the trace's plot.
type traceRun struct {
	ctl   string
	res   *bbresult.Result
	rates []ratePoint
}

// tracePlot draws, per direction, the trace's capacity, each controller's
// shaper rate, and below it each controller's added delay.
func tracePlot(path string, tr *trace.Trace, runs []traceRun) error {
	palette := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}}
	var plots [2][2]*plot.Plot
	for d, name := range []string{"download", "upload"} {
		rp, dp := plot.New(), plot.New()
		rp.Title.Text = fmt.Sprintf("trace %s: %s capacity and shaper rates", tr.Name, name)
		rp.Y.Label.Text, rp.X.Label.Text = "Mbit/s", "seconds"
		dp.Title.Text = fmt.Sprintf("%s: added one-way delay", name)
		dp.Y.Label.Text, dp.X.Label.Text = "ms", "seconds"
		capXY := make(plotter.XYs, len(tr.Down))
		for i := range tr.Down {
			v := tr.Down[i]
			if d == 1 {
				v = tr.Up[i]
			}
			capXY[i] = plotter.XY{X: float64(i) * tr.Step.Seconds(), Y: float64(v) / 1000}
		}
		cl, err := plotter.NewLine(capXY)
		if err != nil {
			return err
		}
		cl.Color, cl.Width = color.Black, vg.Points(1.5)
		rp.Add(cl)
		rp.Legend.Add("capacity", cl)
		for i, run := range runs {
			col := palette[i%len(palette)]
			if len(run.rates) > 0 {
				var xy plotter.XYs
				for j, pt := range run.rates {
					v := pt.Down
					if d == 1 {
						v = pt.Up
					}
					if j > 0 { // steps, not slopes
						xy = append(xy, plotter.XY{X: math.Max(pt.T, 0), Y: xy[len(xy)-1].Y})
					}
					xy = append(xy, plotter.XY{X: math.Max(pt.T, 0), Y: float64(v) / 1000})
				}
				xy = append(xy, plotter.XY{X: tr.Duration().Seconds(), Y: xy[len(xy)-1].Y})
				l, err := plotter.NewLine(xy)
				if err != nil {
					return err
				}
				l.Color = col
				rp.Add(l)
				rp.Legend.Add(run.ctl, l)
			}
			var dxy plotter.XYs
			base := math.Inf(1)
			for _, p := range run.res.Samples.Probes {
				if p.Lost == "" && p.T < traceIdle.Seconds() {
					base = math.Min(base, pick2(d, p))
				}
			}
			for _, p := range run.res.Samples.Probes {
				if p.Lost == "" && p.T >= traceIdle.Seconds() {
					dxy = append(dxy, plotter.XY{X: p.T - traceIdle.Seconds(), Y: pick2(d, p) - base})
				}
			}
			if len(dxy) > 0 {
				l, err := plotter.NewLine(dxy)
				if err != nil {
					return err
				}
				l.Color = col
				dp.Add(l)
				dp.Legend.Add(run.ctl, l)
			}
		}
		plots[d] = [2]*plot.Plot{rp, dp}
	}
	img := vgimg.New(14*vg.Inch, 10*vg.Inch)
	dc := draw.New(img)
	tiles := [][]*plot.Plot{{plots[0][0], plots[1][0]}, {plots[0][1], plots[1][1]}}
	canvases := plot.Align(tiles, draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Millimeter, PadY: vg.Millimeter}, dc)
	for i := range tiles {
		for j := range tiles[i] {
			tiles[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err
}

func pick2(d int, p bbresult.Probe) float64 {
	if d == 1 {
		return p.Up
	}
	return p.Down
}
