// Command storm simulates a retry storm in a fleet of independent
// processes and compares retry strategies.
//
// N processes (-processes, a list: each N is one scenario, run side by
// side) make M calls each (-calls) at t = 0, when the server goes down; it
// is down for -down, then serves -capacity calls per second (enforced per
// 100 ms window) and rejects what exceeds it, with a Retry-After (its queue
// position / capacity) unless -retry-after=false. Every call retries on
// its own rebound.Schedule (rebound's step function, as in failback) with
// a real rebound.Policy; a process's rebound.RetryBudget,
// rebound.AdaptiveThrottle and limiter are its own, and it learns only
// from its own calls: no state is shared between processes. The
// simulation runs in virtual time (package sim): no sleeping, no goroutine
// per call, deterministic for a given -seed.
//
// It prints one table per scenario — calls sent, calls failed while the
// server was down, rejected for overload, attempts rejected locally by a
// throttle (not sent: the call backs off and asks again), calls dropped by
// a budget, the time until every call succeeded and its ratio
// to the physical limit (down + N·M/capacity), and the busiest 100 ms
// while the server was up over its capacity per 100 ms — then checks the
// issue's targets, and draws the retries per 100 ms over time, one panel
// per strategy and scenario, to a PNG (-out, default storm.png in the
// current directory; -out "" skips it).
//
// Usage:
//
//	go run ./examples/storm [flags]
//
//	-processes   comma-separated fleet sizes, one scenario each (default 1000,10000; ~2 s)
//	-calls       calls per process (default 1)
//	-down        how long the server is down (default 10s)
//	-capacity    calls/s served once up, per 100 ms window; 0 = unlimited (default 500)
//	-retry-after the server sends Retry-After with its rejections (default true)
//	-interval    the fixed-interval strategy's interval (default 5s, Dubbo failback)
//	-seed        seed of every random draw (default 1)
//	-horizon     safety cap on virtual time (default 1h)
//	-strategies  comma-separated name fragments to keep, e.g. "jitter,fixed" (default all)
//	-out         PNG path (default storm.png; "" = no PNG)
//	-plot-span   time range drawn in the PNG; 0 = up to the last call (default 1m)
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rebound-go/rebound/examples/storm/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

// defaultProcesses are the fleet sizes of the targets.
const defaultProcesses = "1000,10000"

// options are the parsed flags.
type options struct {
	cfg        sim.Config // Processes is set per scenario
	processes  []int
	interval   time.Duration
	strategies string
	out        string
	plotSpan   time.Duration
}

// scenarios returns one Config per fleet size.
func (o options) scenarios() []sim.Config {
	cfgs := make([]sim.Config, len(o.processes))
	for i, n := range o.processes {
		cfgs[i] = o.cfg
		cfgs[i].Processes = n
	}
	return cfgs
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{cfg: sim.DefaultConfig()}
	o.cfg.RetryAfter = true
	var processes string
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&processes, "processes", defaultProcesses, "comma-separated fleet sizes (independent processes), one scenario each")
	fs.IntVar(&o.cfg.Calls, "calls", sim.DefaultCalls, "calls per process, all failing at t=0")
	fs.DurationVar(&o.cfg.Down, "down", sim.DefaultDown, "how long the server is down")
	fs.Float64Var(&o.cfg.Capacity, "capacity", sim.DefaultCapacity, "calls per second served once up, enforced per 100 ms window; 0 = unlimited")
	fs.BoolVar(&o.cfg.RetryAfter, "retry-after", true, "the server answers a rejection with a Retry-After (queue position / capacity)")
	fs.DurationVar(&o.interval, "interval", sim.DefaultInterval, "interval of the fixed-interval strategy")
	fs.Uint64Var(&o.cfg.Seed, "seed", sim.DefaultSeed, "seed of every random draw")
	fs.DurationVar(&o.cfg.Horizon, "horizon", sim.DefaultHorizon, "safety cap on virtual time; calls not done by then did not converge")
	fs.StringVar(&o.strategies, "strategies", "", `comma-separated fragments of strategy names to run (e.g. "jitter,fixed"); empty = all`)
	fs.StringVar(&o.out, "out", "storm.png", `path of the PNG to write; "" = none`)
	fs.DurationVar(&o.plotSpan, "plot-span", time.Minute, "virtual time range drawn in the PNG; 0 = up to the last call")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for f := range strings.SplitSeq(processes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-processes %q: want comma-separated numbers of at least 1", processes)
		}
		o.processes = append(o.processes, n)
	}
	if o.interval < time.Millisecond {
		return o, fmt.Errorf("-interval %v: must be at least 1ms", o.interval)
	}
	if o.plotSpan < 0 {
		return o, fmt.Errorf("-plot-span %v: must not be negative", o.plotSpan)
	}
	return o, nil
}

// selectStrategies keeps the strategies whose name contains one of the
// comma-separated fragments; every fragment must match something.
func selectStrategies(all []sim.Strategy, filter string) ([]sim.Strategy, error) {
	if strings.TrimSpace(filter) == "" {
		return all, nil
	}
	keep := make([]bool, len(all))
	for frag := range strings.SplitSeq(filter, ",") {
		frag = strings.TrimSpace(frag)
		if frag == "" {
			continue
		}
		found := false
		for i, s := range all {
			if strings.Contains(s.Name, frag) {
				keep[i], found = true, true
			}
		}
		if !found {
			names := make([]string, len(all))
			for i, s := range all {
				names[i] = s.Name
			}
			return nil, fmt.Errorf("-strategies: %q matches none of %s", frag, strings.Join(names, ", "))
		}
	}
	var out []sim.Strategy
	for i, s := range all {
		if keep[i] {
			out = append(out, s)
		}
	}
	return out, nil
}

// run is the program: it parses args, simulates every selected strategy in
// every scenario, prints the tables to stdout and writes the PNG.
// Wall-clock timings go to stderr, so stdout is the same for the same
// flags.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	strategies, err := selectStrategies(sim.Strategies(o.interval), o.strategies)
	if err != nil {
		return err
	}
	scenarios := o.scenarios()

	start := time.Now()
	results, err := simulateAll(scenarios, strategies)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "storm: simulated %d scenarios x %d strategies in %v\n",
		len(scenarios), len(strategies), time.Since(start).Round(time.Millisecond))

	if err := printTables(stdout, o, scenarios, results); err != nil {
		return err
	}
	printTargets(stdout, o.cfg, results)
	printBounds(stdout, scenarios)
	if o.out == "" {
		return nil
	}
	if err := writePNG(o.out, scenarios, o.plotSpan, results); err != nil {
		return err
	}
	info, err := os.Stat(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s (%d bytes)\n", o.out, info.Size())
	return nil
}

// simulateAll runs every strategy in every scenario on GOMAXPROCS
// goroutines (runs are independent and deterministic) and returns
// results[scenario][strategy].
func simulateAll(scenarios []sim.Config, strategies []sim.Strategy) ([][]sim.Result, error) {
	results := make([][]sim.Result, len(scenarios))
	var errs []error
	var mu sync.Mutex
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, cfg := range scenarios {
		results[i] = make([]sim.Result, len(strategies))
		for j, s := range strategies {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := sim.Simulate(cfg, s)
				results[i][j] = r
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

func printTables(w io.Writer, o options, scenarios []sim.Config, results [][]sim.Result) error {
	capacity := "unlimited"
	if o.cfg.Capacity > 0 {
		capacity = fmt.Sprintf("%g calls/s (%g per 100 ms)", o.cfg.Capacity, o.cfg.Capacity/10)
	}
	ra := "rejects with Retry-After = queue position / capacity"
	if !o.cfg.RetryAfter {
		ra = "rejects without Retry-After"
	}
	fmt.Fprintf(w, "retry storm in a fleet: N independent processes x %d call(s) each fail at t=0; server down for %v, then serves %s and %s; seed %d\n",
		o.cfg.Tasks()/max(o.cfg.Processes, 1), o.cfg.Down, capacity, ra, o.cfg.Seed)
	fmt.Fprintf(w, "every call has its own rebound.Schedule; rebound.RetryBudget (%g of first attempts + %g/s over %v) and rebound.AdaptiveThrottle (K = %g over %v) are per process; nothing is shared\n",
		sim.BudgetRatio, sim.BudgetMinPerSecond, sim.BudgetWindow, sim.ThrottleK, sim.ThrottleWindow)
	fmt.Fprintf(w, "throttled: attempts rejected locally, not sent (the call backs off and asks again); dropped: calls ended because their budget refused a retry; gave up: calls whose policy ran out\n")
	fmt.Fprintf(w, "physical limit = down + N*calls/capacity; peak = busiest 100 ms at the server while up / capacity per 100 ms\n")

	for i, cfg := range scenarios {
		fmt.Fprintf(w, "\nN = %d processes (%d calls), physical limit %.1fs\n\n", cfg.Processes, cfg.Tasks(), cfg.PhysicalLimit().Seconds())
		width := len("strategy")
		for _, r := range results[i] {
			width = max(width, len(r.Strategy))
		}
		// Right-aligned numbers; names padded by hand to stay left-aligned.
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%-*s\tcalls\tfailed down\trejected\tthrottled\tdropped\tgave up\tall ok at\t/physical\tpeak/capacity\tmax attempts\t\n", width, "strategy")
		for _, r := range results[i] {
			fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t\n",
				width, r.Strategy, r.Calls, r.FailedDown, r.Rejected, r.Throttled, r.DroppedBudget, r.GaveUp, doneAt(r),
				ratio(r), peak(r, cfg), r.MaxAttempts)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// doneAt formats the time until every call succeeded, or says how many
// did not.
func doneAt(r sim.Result) string {
	if r.Converged {
		return fmt.Sprintf("%.1fs", r.DoneAt.Seconds())
	}
	return fmt.Sprintf("%d-left", r.NotConverged())
}

func ratio(r sim.Result) string {
	if !r.Converged || r.PhysicalLimit <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Converge())
}

func peak(r sim.Result, cfg sim.Config) string {
	if cfg.Capacity == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", peakRatio(r, cfg))
}

func peakRatio(r sim.Result, cfg sim.Config) float64 {
	return float64(r.PeakUp) / (cfg.Capacity * sim.Window.Seconds())
}

// Targets of issue 13 for a fleet strategy.
const (
	targetConverge = 1.5
	targetPeak     = 1.1
)

// printTargets checks the targets for "rebound" (the defaults) and
// "fleet" in every scenario they ran in: converged within 1.5x the physical
// limit, busiest 100 ms at most 1.1x the capacity, fewer calls than both
// fixed-interval and plain full jitter.
func printTargets(w io.Writer, base sim.Config, results [][]sim.Result) {
	if base.Capacity == 0 {
		return
	}
	header := false
	for _, rs := range results {
		var fixed, plain *sim.Result
		for k := range rs {
			switch {
			case strings.HasPrefix(rs[k].Strategy, "fixed-"):
				fixed = &rs[k]
			case rs[k].Strategy == "full-jitter":
				plain = &rs[k]
			}
		}
		for _, r := range rs {
			if r.Strategy != "rebound" && r.Strategy != "fleet" {
				continue
			}
			if !header {
				fmt.Fprintf(w, "\ntargets: converge <= %.1fx physical limit, peak <= %.1fx capacity, fewer calls than fixed and full-jitter\n\n", targetConverge, targetPeak)
				header = true
			}
			cfg := base
			cfg.Processes = r.Processes
			fewer := "-"
			if fixed != nil && plain != nil {
				fewer = mark(r.Calls < fixed.Calls && r.Calls < plain.Calls, fmt.Sprintf("%d vs %d and %d", r.Calls, fixed.Calls, plain.Calls))
			}
			fmt.Fprintf(w, "  N=%-6d %-8s converge %s  peak %s  calls %s\n", r.Processes, r.Strategy,
				mark(r.Converged && r.Converge() <= targetConverge, ratio(r)+"x"),
				mark(peakRatio(r, cfg) <= targetPeak, peak(r, cfg)+"x"), fewer)
		}
	}
}

// peakBound returns the least peak/capacity that any strategy meeting the
// convergence target in fleet small must cause in fleet big (same calls per
// process, same outage). Before its first attempt after the server is back,
// a process has seen only "down", whatever the fleet's size, so it behaves
// the same in both fleets: if every process of the small fleet makes that
// attempt within targetConverge × physical limit, every process of the big
// one does too, and big.Processes first attempts in that many windows put
// at least their average in one window.
func peakBound(small, big sim.Config) float64 {
	after := time.Duration(targetConverge*float64(small.PhysicalLimit())) - small.Down
	windows := math.Ceil(float64(after) / float64(sim.Window))
	if windows < 1 || big.Capacity == 0 {
		return math.Inf(1)
	}
	return math.Ceil(float64(big.Processes)/windows) / (big.Capacity * sim.Window.Seconds())
}

// printBounds prints peakBound for every pair of scenarios, smaller fleet
// first.
func printBounds(w io.Writer, scenarios []sim.Config) {
	if len(scenarios) < 2 || scenarios[0].Capacity == 0 {
		return
	}
	sorted := slices.SortedFunc(slices.Values(scenarios), func(a, b sim.Config) int { return cmp.Compare(a.Processes, b.Processes) })
	fmt.Fprintf(w, "\nlower bound, any strategy without shared state: converging within %.1fx in the smaller fleet forces a peak in the larger one of at least\n\n", targetConverge)
	for i, small := range sorted {
		for _, big := range sorted[i+1:] {
			if big.Processes == small.Processes {
				continue
			}
			fmt.Fprintf(w, "  N=%d converging by %.1fs -> N=%d peak >= %.2fx capacity\n", small.Processes,
				targetConverge*small.PhysicalLimit().Seconds(), big.Processes, peakBound(small, big))
		}
	}
}

func mark(ok bool, figure string) string {
	if ok {
		return "met (" + figure + ")"
	}
	return "MISSED (" + figure + ")"
}
