package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rebound-go/rebound/examples/internal/chart"
)

var (
	requestColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}  // blue
	callColor    = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}  // orange
	outageColor  = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x28} // translucent red
	backColor    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}  // green
)

// writePNG draws, for each run, the registry's requests per 100 ms and the
// consumers' subscribe calls per 100 ms over time, one panel per run, on
// the same axes: x in seconds since the registry went down, y on a
// log(1+y) scale (so that empty windows show next to spikes of a
// thousand). The outage is shaded.
func writePNG(path string, cfg config, results []result) error {
	var runs []result
	for _, r := range results {
		if r.restarted {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return fmt.Errorf("no run saw the registry restart: nothing to plot")
	}
	// Create the file first: a bad path fails before the rendering work.
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	windows, peak := 0, int64(1)
	for _, r := range runs {
		windows = max(windows, len(r.requests), len(r.attempts))
		peak = max(peak, slices.Max(append([]int64{0}, r.requests...)), slices.Max(append([]int64{0}, r.attempts...)))
	}
	xMin := -plotBefore.Seconds()
	xMax := xMin + float64(windows)*window.Seconds()
	yMax := math.Pow(10, math.Ceil(math.Log10(float64(peak)*1.5)))

	plots := make([][]*plot.Plot, len(runs))
	for i := range runs {
		p, err := panel(&runs[i], cfg, xMin, xMax, yMax)
		if err != nil {
			f.Close()
			return err
		}
		plots[i] = []*plot.Plot{p}
	}

	const headerHeight = 58
	width := 9 * vg.Inch
	height := vg.Length(len(runs))*2.6*vg.Inch + headerHeight
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(100))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	header := plot.New().Title.TextStyle
	header.Font.Size = 13
	header.XAlign, header.YAlign = draw.XCenter, draw.YTop
	title := fmt.Sprintf("Registry down for %v, restarted empty: %d consumers x %d services, %d providers",
		cfg.down, cfg.clients, cfg.subs, cfg.providers)
	key := "blue: requests at the registry   orange, dashed: subscribe calls by the consumers   (per 100 ms, log scale)"
	if cfg.nacosAddr != "" {
		title = fmt.Sprintf("Nacos at %s restarted by hand: %d consumers x %d services, %d providers",
			cfg.nacosAddr, cfg.clients, cfg.subs, cfg.providers)
		key = "orange, dashed: subscribe calls by the consumers per 100 ms (log scale)"
	}
	dc.FillText(header, vg.Point{X: width / 2, Y: height - 6}, title)
	header.Font.Size = 10
	dc.FillText(header, vg.Point{X: width / 2, Y: height - 25}, key)
	dc.FillText(header, vg.Point{X: width / 2, Y: height - 39},
		"red: registry down   green, dashed: every subscription back at the registry with the right list")

	tiles := draw.Tiles{
		Rows: len(runs), Cols: 1,
		PadY:   5 * vg.Millimeter,
		PadTop: headerHeight, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 5 * vg.Millimeter,
	}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// panel draws one run.
func panel(r *result, cfg config, xMin, xMax, yMax float64) (*plot.Plot, error) {
	p := plot.New()
	outcome := "every subscription back in " + seconds(r.convergeIn)
	if !r.converged {
		outcome = fmt.Sprintf("%d subscriptions still missing after %s", r.notInPlace, seconds(r.after))
	}
	title := fmt.Sprintf("%s: %s; %d lost, %d duplicated", r.mode, outcome, r.lost, r.duplicated)
	if r.observed {
		title += fmt.Sprintf("; peak %d requests/100 ms", r.peakAfter)
	}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 11
	p.X.Label.Text = "seconds since the registry went down"
	p.Y.Label.Text = "per 100 ms"
	p.X.Min, p.X.Max = xMin, xMax
	p.Y.Min, p.Y.Max = 0, yMax
	p.Y.Scale = chart.Log1pScale{}
	p.Y.Tick.Marker = chart.Log1pTicks{}
	p.X.Tick.Marker = chart.SecondTicks{MaxLabels: 9}
	p.Add(plotter.NewGrid())

	down := r.downFor.Seconds()
	shade, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: down, Y: 0}, {X: down, Y: yMax}, {X: 0, Y: yMax}})
	if err != nil {
		return nil, err
	}
	shade.Color, shade.LineStyle.Width = outageColor, 0
	p.Add(shade)

	for _, s := range []struct {
		counts []int64
		color  color.Color
		width  vg.Length
		dashes []vg.Length
	}{
		{r.requests, requestColor, vg.Points(1.2), nil},
		{r.attempts, callColor, vg.Points(1), []vg.Length{vg.Points(3), vg.Points(2)}},
	} {
		if len(s.counts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.counts))
		for k, n := range s.counts {
			xys[k].X = xMin + (float64(k)+0.5)*window.Seconds()
			xys[k].Y = float64(n)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = s.color, s.width, s.dashes
		p.Add(l)
	}
	if r.converged {
		x := down + r.convergeIn.Seconds()
		b, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: yMax}})
		if err != nil {
			return nil, err
		}
		b.Color, b.Width, b.Dashes = backColor, vg.Points(1.2), []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(b)
	}
	return p, nil
}
