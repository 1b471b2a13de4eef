package main

import (
	"bytes"
	"errors"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound/examples/storm/sim"
)

// row is one parsed line of a printed table.
type row struct {
	name                                                        string
	calls, down, rejected, throttled, dropped, gaveUp, attempts int64
	doneAt, physical, peak                                      string
}

// parseTables returns the rows of every table printed by run, in order.
func parseTables(t *testing.T, out string) [][]row {
	t.Helper()
	var tables [][]row
	inTable := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "strategy":
			inTable = true
			tables = append(tables, nil)
			continue
		case !inTable:
			continue
		case len(f) == 0:
			inTable = false
			continue
		case len(f) != 11:
			t.Fatalf("table row %q: %d fields, want 11", line, len(f))
		}
		n := func(i int) int64 {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				t.Fatalf("row %q, field %d: %v", line, i, err)
			}
			return v
		}
		tables[len(tables)-1] = append(tables[len(tables)-1], row{name: f[0], calls: n(1), down: n(2), rejected: n(3),
			throttled: n(4), dropped: n(5), gaveUp: n(6), doneAt: f[7], physical: f[8], peak: f[9], attempts: n(10)})
	}
	if len(tables) == 0 {
		t.Fatalf("no table in output:\n%s", out)
	}
	return tables
}

func runOK(t *testing.T, args ...string) (stdout string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run(%q): %v\nstderr: %s", args, err, errOut.String())
	}
	return out.String()
}

func TestRunReduced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storm.png")
	out := runOK(t, "-processes", "100,400", "-out", path)

	tables := parseTables(t, out)
	want := sim.Strategies(sim.DefaultInterval)
	if len(tables) != 2 {
		t.Fatalf("%d tables, want 2:\n%s", len(tables), out)
	}
	for k, n := range []int64{100, 400} {
		rows := tables[k]
		if len(rows) != len(want) {
			t.Fatalf("N=%d: %d rows, want %d:\n%s", n, len(rows), len(want), out)
		}
		for i, r := range rows {
			if r.name != want[i].Name {
				t.Errorf("row %d is %q, want %q", i, r.name, want[i].Name)
			}
			if strings.HasSuffix(r.doneAt, "-left") {
				continue // the throttled strategies may need more than the horizon
			}
			// Every call converged: one successful call each.
			if r.down+r.rejected+n != r.calls {
				t.Errorf("N=%d %s: %d down + %d rejected + %d ok != %d calls", n, r.name, r.down, r.rejected, n, r.calls)
			}
			if _, err := strconv.ParseFloat(strings.TrimSuffix(r.doneAt, "s"), 64); err != nil || !strings.HasSuffix(r.doneAt, "s") {
				t.Errorf("N=%d %s: all ok at %q, want seconds", n, r.name, r.doneAt)
			}
			if x, err := strconv.ParseFloat(r.physical, 64); err != nil || x < 1 {
				t.Errorf("N=%d %s: /physical %q, want a ratio >= 1", n, r.name, r.physical)
			}
			if x, err := strconv.ParseFloat(r.peak, 64); err != nil || x <= 0 {
				t.Errorf("N=%d %s: peak %q, want a positive ratio", n, r.name, r.peak)
			}
		}
	}
	for _, s := range []string{"targets:", "N=100    rebound  converge", "N=400    fleet    converge", "N=100 converging by", "wrote " + path} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	// 2 columns of 6 in, 7 rows of 2.3 in, at 100 dpi.
	if img.Width != 1200 || img.Height < 1600 {
		t.Errorf("PNG is %dx%d, want 1200 wide and at least 1600 high", img.Width, img.Height)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	args := []string{"-processes", "300", "-out", ""}
	a, b := runOK(t, args...), runOK(t, args...)
	if a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
	if strings.Contains(a, "wrote") {
		t.Errorf("-out \"\" wrote a PNG:\n%s", a)
	}
	if c := runOK(t, "-processes", "300", "-out", "", "-seed", "2"); c == a {
		t.Errorf("seeds 1 and 2 printed the same table")
	}
}

func TestRunSelectsStrategies(t *testing.T) {
	rows := parseTables(t, runOK(t, "-processes", "100", "-strategies", "jitter, fixed", "-out", ""))[0]
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	if got, want := strings.Join(names, " "), "fixed-5s full-jitter"; got != want {
		t.Errorf("rows %s, want %s", got, want)
	}

	path := filepath.Join(t.TempDir(), "fleet.png")
	tables := parseTables(t, runOK(t, "-processes", "50,60,70", "-calls", "2", "-strategies", "fleet", "-out", path, "-plot-span", "0"))
	if len(tables) != 3 || len(tables[0]) != 1 || tables[2][0].calls < 140 {
		t.Errorf("-processes 50,60,70 -calls 2 -strategies fleet: %d tables", len(tables))
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("PNG: %v", err)
	}

	rows = parseTables(t, runOK(t, "-processes", "100", "-interval", "1s", "-retry-after=false", "-out", ""))[0]
	if rows[0].name != "fixed-1s" {
		t.Errorf("-interval 1s: first row %q, want fixed-1s", rows[0].name)
	}
}

func TestRunNotConverged(t *testing.T) {
	out := runOK(t, "-processes", "1000", "-capacity", "100", "-horizon", "1m", "-strategies", "fixed-5s", "-out", "")
	if !strings.Contains(out, "890-left") {
		t.Errorf("want fixed-5s not converged with 890 left:\n%s", out)
	}
}

func TestPeakBound(t *testing.T) {
	small := sim.Config{Processes: 1000, Calls: 1, Down: 10 * time.Second, Capacity: 500}
	big := small
	big.Processes = 10000
	// 18 s - 10 s = 80 windows for 10,000 first attempts: 125 = 2.5 x 50.
	if got := peakBound(small, big); got != 2.5 {
		t.Errorf("peakBound = %v, want 2.5", got)
	}
	small.Calls, big.Calls = 10, 10 // 45 s - 10 s = 350 windows: ceil(28.6) / 50
	if got := peakBound(small, big); got != 29.0/50 {
		t.Errorf("peakBound with 10 calls = %v, want 0.58", got)
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-processes", "0"}, "-processes"},
		{[]string{"-processes", "10,x"}, "-processes"},
		{[]string{"-calls", "-1"}, "Calls"},
		{[]string{"-capacity", "-1"}, "Capacity"},
		{[]string{"-interval", "0s"}, "-interval"},
		{[]string{"-plot-span", "-1s"}, "-plot-span"},
		{[]string{"-strategies", "nope"}, `"nope" matches none`},
		{[]string{"-nope"}, "not defined"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-processes", "10", "-out", filepath.Join(os.DevNull, "x.png")}, "x.png"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(tt.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tt.want) {
			t.Errorf("run(%q) = %v (stderr %q); want an error mentioning %s", tt.args, err, errOut.String(), tt.want)
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "-processes") {
		t.Errorf("-h: %v, usage %q", err, errOut.String())
	}
}
