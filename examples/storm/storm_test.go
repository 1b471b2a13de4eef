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

	"github.com/rebound-go/rebound/examples/storm/sim"
)

// row is one parsed line of the printed table.
type row struct {
	name                                       string
	calls, down, rejected, peak, p99, attempts int64
	doneAt                                     string
}

// parseTable returns the rows of the table printed by run.
func parseTable(t *testing.T, out string) []row {
	t.Helper()
	var rows []row
	inTable := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "strategy":
			inTable = true
			continue
		case !inTable:
			continue
		case len(f) == 0:
			return rows
		case len(f) != 8:
			t.Fatalf("table row %q: %d fields, want 8", line, len(f))
		}
		n := func(i int) int64 {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				t.Fatalf("row %q, field %d: %v", line, i, err)
			}
			return v
		}
		rows = append(rows, row{name: f[0], calls: n(1), down: n(2), rejected: n(3), doneAt: f[4],
			peak: n(5), p99: n(6), attempts: n(7)})
	}
	if !inTable {
		t.Fatalf("no table in output:\n%s", out)
	}
	return rows
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
	const clients = 200
	path := filepath.Join(t.TempDir(), "storm.png")
	out := runOK(t, "-clients", strconv.Itoa(clients), "-out", path)

	rows := parseTable(t, out)
	want := sim.Strategies(sim.DefaultInterval, sim.DefaultLimit, sim.DefaultBurst)
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i, r := range rows {
		if r.name != want[i].Name {
			t.Errorf("row %d is %q, want %q", i, r.name, want[i].Name)
		}
		// Every client converged: one successful call each.
		if r.down+r.rejected+clients != r.calls {
			t.Errorf("%s: %d down + %d rejected + %d ok != %d calls", r.name, r.down, r.rejected, clients, r.calls)
		}
		if _, err := strconv.ParseFloat(strings.TrimSuffix(r.doneAt, "s"), 64); err != nil || !strings.HasSuffix(r.doneAt, "s") {
			t.Errorf("%s: all ok at %q, want seconds", r.name, r.doneAt)
		}
		if r.p99 > r.peak || r.peak > clients || r.attempts < 2 {
			t.Errorf("%s: p99 %d, peak %d, max calls %d", r.name, r.p99, r.peak, r.attempts)
		}
		if strings.HasSuffix(r.name, limiterSuffix) && r.peak > int64(float64(sim.DefaultLimit)/10)+sim.DefaultBurst {
			t.Errorf("%s: peak %d above the limiter's", r.name, r.peak)
		}
	}

	if !strings.Contains(out, "wrote "+path) {
		t.Errorf("output does not name the PNG %s:\n%s", path, out)
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
	// 2 columns of 6 in, 5 rows of 2.3 in, at 100 dpi.
	if img.Width != 1200 || img.Height < 1150 {
		t.Errorf("PNG is %dx%d, want 1200 wide and at least 1150 high", img.Width, img.Height)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	args := []string{"-clients", "300", "-out", ""}
	a, b := runOK(t, args...), runOK(t, args...)
	if a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
	if strings.Contains(a, "wrote") {
		t.Errorf("-out \"\" wrote a PNG:\n%s", a)
	}
	if c := runOK(t, "-clients", "300", "-out", "", "-seed", "2"); c == a {
		t.Errorf("seeds 1 and 2 printed the same table")
	}
}

func TestRunSelectsStrategies(t *testing.T) {
	rows := parseTable(t, runOK(t, "-clients", "100", "-strategies", "jitter, fixed", "-out", ""))
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	want := "fixed-5s full-jitter equal-jitter fixed-5s+limiter full-jitter+limiter equal-jitter+limiter"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}

	// Two panels, drawn up to the last call.
	path := filepath.Join(t.TempDir(), "decorrelated.png")
	rows = parseTable(t, runOK(t, "-clients", "100", "-strategies", "decorr", "-out", path, "-plot-span", "0"))
	if len(rows) != 2 {
		t.Errorf("-strategies decorr: %d rows, want 2", len(rows))
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("PNG: %v", err)
	}

	rows = parseTable(t, runOK(t, "-clients", "100", "-limit", "0", "-interval", "1s", "-out", ""))
	if len(rows) != 5 || rows[0].name != "fixed-1s" {
		t.Errorf("-limit 0 -interval 1s: %d rows, first %q; want 5, fixed-1s", len(rows), rows[0].name)
	}
}

func TestRunNotConverged(t *testing.T) {
	out := runOK(t, "-clients", "1000", "-capacity", "100", "-horizon", "1m", "-strategies", "fixed-5s", "-limit", "0", "-out", "")
	if !strings.Contains(out, "not converged (890 left)") {
		t.Errorf("want fixed-5s not converged with 890 left:\n%s", out)
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-clients", "0"}, "Clients"},
		{[]string{"-capacity", "-1"}, "Capacity"},
		{[]string{"-burst", "0"}, "Burst"},
		{[]string{"-limit", "-1"}, "-limit"},
		{[]string{"-interval", "0s"}, "-interval"},
		{[]string{"-plot-span", "-1s"}, "-plot-span"},
		{[]string{"-strategies", "nope"}, `"nope" matches none`},
		{[]string{"-nope"}, "not defined"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-clients", "10", "-out", filepath.Join(os.DevNull, "x.png")}, "x.png"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(tt.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tt.want) {
			t.Errorf("run(%q) = %v (stderr %q); want an error mentioning %s", tt.args, err, errOut.String(), tt.want)
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "-clients") {
		t.Errorf("-h: %v, usage %q", err, errOut.String())
	}
}

func TestLayoutPairsLimitedStrategies(t *testing.T) {
	rs := []sim.Result{{Strategy: "a"}, {Strategy: "b"}, {Strategy: "b+limiter"}, {Strategy: "c+limiter"}}
	grid := layout(rs)
	name := func(r *sim.Result) string {
		if r == nil {
			return "-"
		}
		return r.Strategy
	}
	var got []string
	for _, line := range grid {
		got = append(got, name(line[0])+"|"+name(line[1]))
	}
	if want := "a|- b|b+limiter -|c+limiter"; strings.Join(got, " ") != want {
		t.Errorf("layout = %v, want %s", got, want)
	}
	if g := layout(rs[:2]); len(g) != 2 || len(g[0]) != 1 {
		t.Errorf("without limiter: %d rows of %d, want 2 of 1", len(g), len(g[0]))
	}
}
