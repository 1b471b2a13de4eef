// Command storm simulates a retry storm and compares retry strategies.
//
// A crowd of clients lose their server at the same instant (t = 0: every
// client's first call fails); the server is down for -down, then serves
// -capacity calls per second (enforced per 100 ms window) and fails what
// exceeds it. Every client retries until it succeeds, with its own BackOff
// built from a real rebound.Policy: fixed interval, exponential without
// jitter, full, equal and decorrelated jitter, and each of those with a
// golang.org/x/time/rate limiter shared by all clients (the semantics of
// rebound.WithLimiter: a retry waits for a token after its backoff delay).
// The simulation runs in virtual time (package sim): no sleeping, no
// goroutine per client, deterministic for a given -seed.
//
// It prints one row per strategy — total calls, calls failed while the
// server was down, calls rejected for overload, the time until every client
// succeeded, and the peak and 99th percentile of retries per 100 ms window
// — and draws the retries per 100 ms over time, one panel per strategy, to
// a PNG (-out, default storm.png in the current directory; -out "" skips
// it).
//
// Usage:
//
//	go run ./examples/storm [flags]
//
//	-clients   number of clients (default 1000, well under a second; 100000 takes
//	           ~20 s on 2 cores, mostly the fixed-interval strategy's 59 million calls)
//	-down      how long the server is down (default 10s)
//	-capacity  calls/s served once up, per 100 ms window; 0 = unlimited (default 500)
//	-interval  the fixed-interval strategy's interval (default 5s, Dubbo failback)
//	-limit     shared limiter rate, retries/s; 0 = no limiter rows (default 250)
//	-burst     shared limiter burst (default 25)
//	-seed      seed of every jitter draw (default 1)
//	-horizon   safety cap on virtual time (default 1h)
//	-strategies comma-separated name fragments to keep, e.g. "jitter,fixed" (default all)
//	-out       PNG path (default storm.png; "" = no PNG)
//	-plot-span time range drawn in the PNG; 0 = up to the last call (default 2m)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/time/rate"

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

// options are the parsed flags.
type options struct {
	cfg        sim.Config
	interval   time.Duration
	limit      float64
	burst      int
	strategies string
	out        string
	plotSpan   time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{cfg: sim.DefaultConfig()}
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.cfg.Clients, "clients", sim.DefaultClients, "number of clients, all failing at t=0")
	fs.DurationVar(&o.cfg.Down, "down", sim.DefaultDown, "how long the server is down")
	fs.Float64Var(&o.cfg.Capacity, "capacity", sim.DefaultCapacity, "calls per second served once up, enforced per 100 ms window; 0 = unlimited")
	fs.DurationVar(&o.interval, "interval", sim.DefaultInterval, "interval of the fixed-interval strategy")
	fs.Float64Var(&o.limit, "limit", float64(sim.DefaultLimit), "rate of the shared retry limiter, retries/s; 0 = no limiter strategies")
	fs.IntVar(&o.burst, "burst", sim.DefaultBurst, "burst of the shared retry limiter")
	fs.Uint64Var(&o.cfg.Seed, "seed", sim.DefaultSeed, "seed of every jitter draw")
	fs.DurationVar(&o.cfg.Horizon, "horizon", sim.DefaultHorizon, "safety cap on virtual time; clients not done by then did not converge")
	fs.StringVar(&o.strategies, "strategies", "", `comma-separated fragments of strategy names to run (e.g. "jitter,fixed"); empty = all`)
	fs.StringVar(&o.out, "out", "storm.png", `path of the PNG to write; "" = none`)
	fs.DurationVar(&o.plotSpan, "plot-span", 2*time.Minute, "virtual time range drawn in the PNG; 0 = up to the last call")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.interval < time.Millisecond {
		return o, fmt.Errorf("-interval %v: must be at least 1ms", o.interval)
	}
	if !(o.limit >= 0) {
		return o, fmt.Errorf("-limit %v: must not be negative", o.limit)
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

// run is the program: it parses args, simulates every selected strategy,
// prints the table to stdout and writes the PNG. Wall-clock timings go to
// stderr, so stdout is the same for the same flags.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	strategies, err := selectStrategies(sim.Strategies(o.interval, rate.Limit(o.limit), o.burst), o.strategies)
	if err != nil {
		return err
	}

	start := time.Now()
	results, err := simulateAll(o.cfg, strategies)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "storm: simulated %d clients x %d strategies in %v\n",
		o.cfg.Clients, len(strategies), time.Since(start).Round(time.Millisecond))

	if err := printTable(stdout, o, results); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	if err := writePNG(o.out, o.cfg, o.plotSpan, results); err != nil {
		return err
	}
	info, err := os.Stat(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s (%d bytes)\n", o.out, info.Size())
	return nil
}

// simulateAll runs the strategies on GOMAXPROCS goroutines (runs are
// independent and deterministic) and returns the results in order.
func simulateAll(cfg sim.Config, strategies []sim.Strategy) ([]sim.Result, error) {
	results := make([]sim.Result, len(strategies))
	errs := make([]error, len(strategies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, s := range strategies {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = sim.Simulate(cfg, s)
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

func printTable(w io.Writer, o options, results []sim.Result) error {
	capacity := "unlimited"
	if o.cfg.Capacity > 0 {
		capacity = fmt.Sprintf("%g calls/s (%g per 100 ms)", o.cfg.Capacity, o.cfg.Capacity/10)
	}
	fmt.Fprintf(w, "retry storm: %d clients fail at t=0; server down for %v, then serves %s; seed %d\n",
		o.cfg.Clients, o.cfg.Down, capacity, o.cfg.Seed)
	fmt.Fprintf(w, "policies: fixed %v; others rebound defaults (1s doubling, max 30s); limiter %g retries/s, burst %d, shared by all clients\n",
		o.interval, o.limit, o.burst)
	fmt.Fprintf(w, "peak and p99: retries per 100 ms window (first calls excluded), p99 over windows up to the last call\n\n")

	// Right-aligned numbers; names padded by hand to stay left-aligned.
	width := len("strategy")
	for _, r := range results {
		width = max(width, len(r.Strategy))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tcalls\tfailed down\trejected\tall ok at\tpeak/100ms\tp99/100ms\tmax calls/client\t\n", width, "strategy")
	for _, r := range results {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t\n",
			width, r.Strategy, r.Calls, r.FailedDown, r.Rejected, doneAt(r),
			r.PeakRetries, r.P99Retries, r.MaxAttempts)
	}
	return tw.Flush()
}

// doneAt formats the time until every client succeeded, or says how many
// did not.
func doneAt(r sim.Result) string {
	if r.Converged {
		return fmt.Sprintf("%.1fs", r.DoneAt.Seconds())
	}
	if r.GaveUp > 0 {
		return fmt.Sprintf("not converged (%d left, %d gave up)", r.NotConverged(), r.GaveUp)
	}
	return fmt.Sprintf("not converged (%d left)", r.NotConverged())
}
