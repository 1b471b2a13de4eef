package chart

import (
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

func labels(ticks []plot.Tick) string {
	var out []string
	for _, tk := range ticks {
		if tk.Label != "" {
			out = append(out, tk.Label)
		}
	}
	return strings.Join(out, " ")
}

func TestAxes(t *testing.T) {
	s := Log1pScale{}
	if s.Normalize(0, 999, 0) != 0 || s.Normalize(0, 999, 999) != 1 {
		t.Errorf("log1p scale does not map [0, 999] onto [0, 1]")
	}
	if got := s.Normalize(0, 999, 31); got < 0.49 || got > 0.51 {
		t.Errorf("Normalize(0, 999, 31) = %v, want 0.5 (log 32 / log 1000)", got)
	}
	if got := labels((Log1pTicks{}).Ticks(0, 1000)); got != "0 1 10 100 1000" {
		t.Errorf("log ticks %q", got)
	}
	if got := labels((Log1pTicks{}).Ticks(0, 1e5)); got != "0 10 100 1000 10000 100000" {
		t.Errorf("log ticks up to 1e5: %q", got)
	}
	if got := labels((SecondTicks{MaxLabels: 7}).Ticks(0, 120)); got != "0 20 40 60 80 100 120" {
		t.Errorf("time ticks %q", got)
	}
	if got := labels((SecondTicks{MaxLabels: 9}).Ticks(-2, 13)); got != "-2 0 2 4 6 8 10 12" {
		t.Errorf("time ticks from -2 s: %q", got)
	}
}
