package main

import (
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/lab/internal/noise"
)

// noisePlot draws the host's noise over one test run: per 100 ms, the
// share of the worse vCPU's time it waited (steal) and of the host's CPU
// other processes used, the gate's limit, and the phases as labelled
// lines, so a latency spike in the test's own plot can be laid beside the
// host's.
func noisePlot(path string, g *noise.Reader, r *bbresult.Result) error {
	if len(r.Phases) == 0 {
		return nil
	}
	end := r.Started.Add(time.Duration(r.Phases[len(r.Phases)-1].End * float64(time.Second)))
	ts, worst, err := g.Series(r.Started, end, 100*time.Millisecond)
	if err != nil || len(ts) == 0 {
		return err
	}
	p := plot.New()
	p.Title.Text = "host noise during " + r.Started.UTC().Format(time.RFC3339)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "% per 100 ms"
	xy := make(plotter.XYs, len(ts))
	for i := range ts {
		xy[i].X, xy[i].Y = ts[i], 100*worst[i]
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	p.Add(line)
	fg, err := g.ForeignSeries(r.Started, end, 100*time.Millisecond)
	if err != nil {
		return err
	}
	fxy := make(plotter.XYs, min(len(fg), len(ts)))
	for i := range fxy {
		fxy[i].X, fxy[i].Y = ts[i], 100*fg[i]
	}
	fline, err := plotter.NewLine(fxy)
	if err != nil {
		return err
	}
	fline.Color = color.RGBA{R: 0xd0, G: 0x70, A: 0xff}
	p.Add(fline)
	stall, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 100 * maxForeign}, {X: ts[len(ts)-1], Y: 100 * maxForeign}})
	if err != nil {
		return err
	}
	stall.Color = color.RGBA{R: 0xc0, A: 0xff}
	stall.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(stall)
	p.Legend.Add("vCPU steal (worst vCPU)", line)
	p.Legend.Add("host CPU used by other processes", fline)
	p.Legend.Add("gate: other processes' mean over a phase above this: re-run", stall)
	var labels plotter.XYLabels
	for _, ph := range r.Phases {
		l, err := plotter.NewLine(plotter.XYs{{X: ph.Start, Y: 0}, {X: ph.Start, Y: 100 * maxForeign * 3}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x90}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: ph.Start, Y: 100 * maxForeign * 3})
		labels.Labels = append(labels.Labels, ph.Name)
	}
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	p.Add(lb)
	return p.Save(10*vg.Inch, 4*vg.Inch, path)
}
