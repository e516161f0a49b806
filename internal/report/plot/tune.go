package plot

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sqmkit/sqmkit/internal/search"
)

// WriteTune renders a tune search: per direction, the added latency
// (median and p95) and the goodput at each rate tried, against the rate as
// a share of the measured line, with the target's bars and the rates
// chosen.
func WriteTune(path string, r *search.Result) error {
	return write(path, func(c vg.CanvasSizer) error { return drawTune(c, r) })
}

func drawTune(c vg.CanvasSizer, r *search.Result) error {
	lat, good := plot.New(), plot.New()
	lat.Title.Text = fmt.Sprintf("sqmkit tune, target %s: added latency and goodput by shaper rate", r.Target.Name)
	lat.Y.Label.Text = "added latency, ms"
	good.Y.Label.Text = "goodput, Mbit/s"
	good.X.Label.Text = "shaper rate, % of the measured line"
	for _, d := range []struct {
		k   search.Kind
		ch  search.Choice
		col color.RGBA
	}{{search.Download, r.Download, color.RGBA{B: 0xc0, A: 0xff}}, {search.Upload, r.Upload, color.RGBA{R: 0xd0, G: 0x70, A: 0xff}}} {
		var med, p95, gp plotter.XYs
		for _, st := range r.Steps {
			if st.Kind != d.k || d.ch.Line.RateKbit == 0 {
				continue
			}
			x := 100 * float64(st.RateKbit) / float64(d.ch.Line.RateKbit)
			med = append(med, plotter.XY{X: x, Y: st.AddedMedian})
			p95 = append(p95, plotter.XY{X: x, Y: st.AddedP95})
			gp = append(gp, plotter.XY{X: x, Y: float64(st.GoodputKbit) / 1000})
		}
		if len(med) == 0 {
			continue
		}
		for _, s := range []struct {
			p     *plot.Plot
			xy    plotter.XYs
			shape draw.GlyphDrawer
			name  string
		}{{lat, med, draw.CircleGlyph{}, string(d.k) + " median"}, {lat, p95, draw.TriangleGlyph{}, string(d.k) + " p95"}, {good, gp, draw.CircleGlyph{}, string(d.k)}} {
			sc, err := plotter.NewScatter(s.xy)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = d.col, s.shape, vg.Points(3)
			s.p.Add(sc)
			s.p.Legend.Add(s.name, sc)
		}
		chosen := 100 * float64(d.ch.RateKbit) / float64(d.ch.Line.RateKbit)
		topLat, topGood := tops(r)
		for _, m := range []struct {
			p   *plot.Plot
			top float64
		}{{lat, topLat}, {good, topGood}} {
			p := m.p
			l, err := plotter.NewLine(plotter.XYs{{X: chosen, Y: 0}, {X: chosen, Y: m.top}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes = d.col, []vg.Length{vg.Points(4), vg.Points(2)}
			p.Add(l)
		}
	}
	for _, bar := range []float64{r.Target.MedianMs, r.Target.P95Ms} {
		l, err := plotter.NewLine(plotter.XYs{{X: 100 * search.Floor, Y: bar}, {X: 100, Y: bar}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x80}
		lat.Add(l)
	}
	lat.Legend.Top = true
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: 4, PadBottom: 4, PadLeft: 4, PadRight: 12, PadY: 8}
	cs := plot.Align([][]*plot.Plot{{lat}, {good}}, tiles, dc)
	lat.Draw(cs[0][0])
	good.Draw(cs[1][0])
	return nil
}

// tops are the highest latency (p95) and goodput (Mbit/s) of r's steps,
// for the vertical markers of the chosen rates.
func tops(r *search.Result) (lat, good float64) {
	lat, good = r.Target.P95Ms, 1
	for _, st := range r.Steps {
		lat, good = max(lat, st.AddedP95), max(good, float64(st.GoodputKbit)/1000)
	}
	return lat, good
}
