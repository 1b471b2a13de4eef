package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

func TestParseFlagsDefaults(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.clients != 20 || c.subs != 50 || c.providers != 3 || c.down != 10*time.Second ||
		c.timeout != 10*time.Second || c.restarts != 2 || c.tpsFirst != 10 || c.regReject != 1 || c.clean || c.naiveNoSleep || c.jitter != rebound.FullJitter ||
		!c.updateCacheWhenEmpty || c.nacosAddr != "" || c.out != filepath.Join(os.TempDir(), "outage.png") ||
		!slices.Equal(c.modes, []mode{sdkMode, naiveMode, reboundMode}) {
		t.Fatalf("defaults: %+v", c)
	}
	if c.policy() != (rebound.Policy{}) {
		t.Fatalf("default policy %+v, want rebound's zero Policy", c.policy())
	}
	c, err = parseFlags([]string{"-clean"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.clean || c.restarts != 0 || c.tpsFirst != 0 || c.regReject != 0 {
		t.Fatalf("-clean: %+v, want no restart and no TPS rejection of subscribes or registers", c)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-clients", "0"}, "-clients 0"},
		{[]string{"-subs", "1001"}, "-subs 1001"},
		{[]string{"-providers", "-1"}, "-providers -1"},
		{[]string{"-down", "0s"}, "-down 0s"},
		{[]string{"-down", "2h"}, "-down 2h0m0s"},
		{[]string{"-timeout", "10ms"}, "-timeout 10ms"},
		{[]string{"-restarts", "3", "-clients", "2"}, "-restarts 3"},
		{[]string{"-nosleep-cap", "0"}, "-nosleep-cap 0"},
		{[]string{"-jitter", "some"}, `-jitter "some"`},
		{[]string{"-only", "both"}, `-only "both"`},
		{[]string{"-clean", "-restarts", "2"}, "-clean with -restarts"},
		{[]string{"-clean", "-tps-reject", "5"}, "-clean with -tps-reject"},
		{[]string{"-tps-reject", "-1"}, "-tps-reject -1"},
		{[]string{"-clean", "-tps-reject-register", "1"}, "-clean with -tps-reject-register"},
		{[]string{"-tps-reject-register", "-1"}, "-tps-reject-register -1"},
		{[]string{"-nacos", "10.0.0.1:8848", "-tps-reject-register", "1"}, "-tps-reject-register 1 with -nacos"},
		{[]string{"-nacos", "10.0.0.1:8848", "-tps-reject", "10"}, "-tps-reject 10 with -nacos"},
		{[]string{"-nacos", "localhost"}, "want host:port"},
		{[]string{"-nacos", ":8848"}, "host is empty"},
		{[]string{"-nacos", "[::1]:8848"}, "IPv6"},
		{[]string{"-nacos", "10.0.0.1:0"}, "port must be"},
		{[]string{"-nacos", "10.0.0.1:65000"}, "port must be"},
		{[]string{"-nacos", "10.0.0.1:http"}, "port must be"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-clients", "x"}, "invalid value"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	var help strings.Builder
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(help.String(), "-naive-nosleep") || !strings.Contains(help.String(), usageSummary) {
		t.Errorf("-h output:\n%s", help.String())
	}
}

func TestParseFlagsNacos(t *testing.T) {
	c, err := parseFlags([]string{"-nacos", "nacos.internal:8848", "-only", "rebound", "-jitter", "equal"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.nacosServer.IpAddr != "nacos.internal" || c.nacosServer.Port != 8848 || c.nacosServer.GrpcPort != 0 {
		t.Fatalf("server config %+v", c.nacosServer)
	}
	if !slices.Equal(c.modes, []mode{reboundMode}) || c.jitter != rebound.EqualJitter || c.tpsFirst != 0 || c.regReject != 0 {
		t.Fatalf("config %+v", c)
	}
}

func TestSeries(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSeries(start, time.Second)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// 3 events at 5 ms, 4 at 95 ms, 5 at 105 ms, 1 at 500 ms; one before
	// the start and one after the span, clamped to the ends.
	for range 3 {
		s.add(at(5 * time.Millisecond))
	}
	for range 4 {
		s.add(at(95 * time.Millisecond))
	}
	for range 5 {
		s.add(at(105 * time.Millisecond))
	}
	s.add(at(500 * time.Millisecond))
	s.add(at(-time.Second))
	s.add(at(time.Hour))

	if got := s.sum(at(0), at(time.Second+bucket)); got != 15 {
		t.Errorf("sum of everything = %d, want 15", got)
	}
	if got := s.sum(at(10*time.Millisecond), at(110*time.Millisecond)); got != 9 {
		t.Errorf("sum [10ms, 110ms) = %d, want 9", got)
	}
	// Fixed windows would see 3+4+1(clamped) = 8 and 5; a sliding one sees 4+5.
	if got := s.peak(at(10*time.Millisecond), at(900*time.Millisecond)); got != 9 {
		t.Errorf("peak from 10ms = %d, want 9 (95 ms and 105 ms in one 100 ms window)", got)
	}
	if got := s.windows(at(0), at(300*time.Millisecond)); !slices.Equal(got, []int64{8, 5, 0}) {
		t.Errorf("windows = %v, want [8 5 0]", got)
	}
}

func TestWatch(t *testing.T) {
	var w watch
	a := []model.Instance{{Ip: "10.0.0.2", Port: 80, Weight: 1, Healthy: true, Enable: true}, {Ip: "10.0.0.1", Port: 80, Weight: 1, Healthy: true, Enable: true}}
	b := []model.Instance{a[1], a[0]} // same list, other order
	w.sdkCallback(a, nil)
	w.sdkCallback(b, nil) // duplicate
	w.sdkCallback(nil, nil)
	w.sdkCallback(nil, nil) // duplicate, empty
	w.sdkCallback(a, errors.New("ignored"))
	w.listener([]subscriber.Instance{{IP: "10.0.0.1", Port: 80, Weight: 1, Healthy: true, Enabled: true}})
	st := w.stats()
	if st.deliveries != 5 || st.duplicates != 2 || st.empties != 2 || !st.has {
		t.Fatalf("stats %+v, want 5 deliveries, 2 duplicates, 2 empties", st)
	}
	if want := instanceKey("10.0.0.1", 80, 1, true, true); st.last != want {
		t.Fatalf("last %q, want %q", st.last, want)
	}
	if sdkKey(a) != sdkKey(b) || sdkKey(a) == sdkKey(a[:1]) {
		t.Fatal("sdkKey must not depend on order and must tell lists apart")
	}
}

func TestSplitCells(t *testing.T) {
	got := splitCells("   1.2s  not within 8.0s  ")
	if !slices.Equal(got, []string{"1.2s", "not within 8.0s"}) {
		t.Fatalf("splitCells = %q", got)
	}
}

// splitCells splits the right-aligned cells of a row (separated by two or
// more spaces; a cell may contain single spaces, as "not within 8.0s").
func splitCells(s string) []string {
	var cells []string
	for _, c := range strings.Split(strings.TrimSpace(s), "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}

// The verdict comes before the scenario's prose and the table: a reader
// used to find it only after 23 rows and 18 lines of notes.
func TestVerdictFirst(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	results := []result{
		{mode: sdkMode, observed: true, restarted: true, notInPlace: 212, lost: 212, provTotal: 150, after: 10 * time.Second},
		{mode: reboundMode, observed: true, restarted: true, converged: true, convergeIn: 6400 * time.Millisecond, provTotal: 150},
	}
	var b strings.Builder
	if err := printTable(&b, cfg, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	verdict, table := strings.Index(out, "Verdict"), strings.Index(out, rowConverged)
	if verdict != 0 || table < 0 {
		t.Fatalf("the output does not start with the verdict (at %d; table at %d):\n%s", verdict, table, out)
	}
	for _, want := range []string{
		"sdk:     at the end of recovery, 212 of 1000 subscriptions missing, 212 notifications lost.",
		"rebound: every subscription back with the right list in 6.4s, every provider instance re-registered, nothing lost.",
	} {
		if i := strings.Index(out, want); i < 0 || i > strings.Index(out, "Registry outage:") {
			t.Errorf("%q not in the verdict, before the scenario:\n%s", want, out)
		}
	}
}
