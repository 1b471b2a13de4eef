// Package chart holds the gonum/plot axis helpers the example programs
// share: a logarithmic y axis that can show 0 and a time axis in seconds.
// gonum's own plot.LogScale and plot.LogTicks cannot place 0, which the
// request-per-window plots need for idle windows.
package chart

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
)

// Log1pScale is a logarithmic axis that can show 0: it places y at
// log(1+y), so 0, 1, 10, 100 are almost evenly spaced.
type Log1pScale struct{}

// Normalize implements plot.Normalizer.
func (Log1pScale) Normalize(lo, hi, x float64) float64 {
	lo, hi = math.Log1p(max(lo, 0)), math.Log1p(max(hi, 0))
	if hi == lo {
		return 0
	}
	return (math.Log1p(max(x, 0)) - lo) / (hi - lo)
}

// Log1pTicks labels 0 and the powers of ten, with minor ticks at 2..9 of
// each decade. Above 1,000 the label 1 is left out: on a log(1+y) axis it
// would sit on top of 0.
type Log1pTicks struct{}

// Ticks implements plot.Ticker.
func (Log1pTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := []plot.Tick{{Value: 0, Label: "0"}}
	for decade := 1.0; decade <= hi; decade *= 10 {
		if decade >= lo {
			label := fmt.Sprintf("%g", decade)
			if decade == 1 && hi > 1000 {
				label = ""
			}
			ticks = append(ticks, plot.Tick{Value: decade, Label: label})
		}
		for m := 2.0; m < 10 && m*decade <= hi; m++ {
			ticks = append(ticks, plot.Tick{Value: m * decade})
		}
	}
	return ticks
}

// SecondTicks labels a time axis in seconds every 1, 2, 5, 10, 20, ...
// seconds, the smallest step that gives at most MaxLabels labels (any
// MaxLabels below 1 counts as 1), with an unlabelled tick halfway between.
type SecondTicks struct{ MaxLabels int }

// Ticks implements plot.Ticker.
func (s SecondTicks) Ticks(lo, hi float64) []plot.Tick {
	most := float64(max(s.MaxLabels, 1))
	step := 1.0
	for _, m := range []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000} {
		step = m
		if (hi-lo)/m <= most {
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		label := fmt.Sprintf("%g", v)
		if math.Abs(v) < step/1e6 {
			label = "0" // not "-0"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		if minor := v + step/2; minor < hi {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}
