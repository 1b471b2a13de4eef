package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rebound-go/rebound/examples/internal/chart"
	"github.com/rebound-go/rebound/examples/storm/sim"
)

var (
	retryColor    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	capacityColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
	backUpColor   = color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff} // grey
)

// writePNG draws the retries per 100 ms window over time, one panel per
// strategy (rows) and scenario (columns). Every panel has the same axes: x
// from 0 to span (0 means up to the last event of any run), y on a
// log(1+y) scale so that empty windows (0) can be drawn next to a spike of
// thousands.
func writePNG(path string, scenarios []sim.Config, span time.Duration, results [][]sim.Result) error {
	if len(results) == 0 || len(results[0]) == 0 {
		return fmt.Errorf("no strategy to plot")
	}
	// Create the file first: a bad path fails before the rendering work.
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if span == 0 {
		for _, rs := range results {
			for _, r := range rs {
				span = max(span, r.End)
			}
		}
		span = max(span, sim.Window)
	}
	peak := 1
	for _, rs := range results {
		for _, r := range rs {
			peak = max(peak, r.PeakRetries)
		}
	}
	cfg := scenarios[0]
	perWindow := cfg.Capacity * sim.Window.Seconds() // 0 if unlimited
	yMax := math.Pow(10, math.Ceil(math.Log10(float64(max(float64(peak), perWindow)))))

	cols, rows := len(results), len(results[0])
	plots := make([][]*plot.Plot, rows)
	for row := range rows {
		plots[row] = make([]*plot.Plot, cols)
		for col := range cols {
			p, err := panel(&results[col][row], scenarios[col], span, yMax, perWindow)
			if err != nil {
				f.Close()
				return err
			}
			plots[row][col] = p
		}
	}

	const headerHeight = 44
	width := vg.Length(cols) * 6 * vg.Inch
	height := vg.Length(rows)*2.3*vg.Inch + headerHeight
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(100))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	header := plot.New().Title.TextStyle
	header.Font.Size = 13
	header.XAlign, header.YAlign = draw.XCenter, draw.YTop
	capacity := "unlimited capacity"
	if cfg.Capacity > 0 {
		capacity = fmt.Sprintf("%g calls/s", cfg.Capacity)
	}
	dc.FillText(header, vg.Point{X: width / 2, Y: height - 6},
		fmt.Sprintf("Retry storm in fleets of independent processes (%d call(s) each, nothing shared): server down for %v, then serves %s",
			cfg.Tasks()/cfg.Processes, cfg.Down, capacity))
	key := "blue: retries per 100 ms (first calls at t=0 not shown; log scale)   grey dotted: server back up"
	if perWindow > 0 {
		key += fmt.Sprintf("   red dashed: capacity, %g per 100 ms", perWindow)
	}
	header.Font.Size = 10
	dc.FillText(header, vg.Point{X: width / 2, Y: height - 24}, key)

	tiles := draw.Tiles{
		Rows: rows, Cols: cols,
		PadX: 6 * vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: headerHeight, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter,
	}
	canvases := plot.Align(plots, tiles, dc)
	for row := range plots {
		for col, p := range plots[row] {
			if p != nil {
				p.Draw(canvases[row][col])
			}
		}
	}

	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// panel draws one strategy.
func panel(r *sim.Result, cfg sim.Config, span time.Duration, yMax, perWindow float64) (*plot.Plot, error) {
	p := plot.New()
	outcome := "all ok at " + doneAt(*r)
	if !r.Converged {
		outcome = fmt.Sprintf("%d of %d calls not delivered", r.NotConverged(), r.Tasks)
	}
	p.Title.Text = fmt.Sprintf("N=%d %s: %s, %d calls, %d rejected", r.Processes, r.Strategy, outcome, r.Calls, r.Rejected)
	p.Title.TextStyle.Font.Size = 11
	p.X.Label.Text = "seconds since the server went down"
	p.Y.Label.Text = "retries / 100 ms"
	p.X.Min, p.X.Max = 0, span.Seconds()
	p.Y.Min, p.Y.Max = 0, yMax
	p.Y.Scale = chart.Log1pScale{}
	p.Y.Tick.Marker = chart.Log1pTicks{}
	p.X.Tick.Marker = chart.SecondTicks{MaxLabels: 7}
	p.Add(plotter.NewGrid())

	n := min(len(r.Retries), int(span/sim.Window)+1)
	xys := make(plotter.XYs, n)
	for k := range n {
		xys[k].X = (float64(k) + 0.5) * sim.Window.Seconds()
		xys[k].Y = float64(r.Retries[k])
	}
	if n > 0 {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = retryColor, vg.Points(1)
		p.Add(l)
	}
	if perWindow > 0 {
		c, err := plotter.NewLine(plotter.XYs{{X: 0, Y: perWindow}, {X: span.Seconds(), Y: perWindow}})
		if err != nil {
			return nil, err
		}
		c.Color, c.Width, c.Dashes = capacityColor, vg.Points(1.2), []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(c)
	}
	if cfg.Down > 0 && cfg.Down <= span {
		b, err := plotter.NewLine(plotter.XYs{{X: cfg.Down.Seconds(), Y: 0}, {X: cfg.Down.Seconds(), Y: yMax}})
		if err != nil {
			return nil, err
		}
		b.Color, b.Width, b.Dashes = backUpColor, vg.Points(1), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(b)
	}
	return p, nil
}
