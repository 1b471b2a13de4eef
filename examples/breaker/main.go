// Command breaker shows per-target circuit breakers under failback, with
// the no-breaker baseline in the same run.
//
// Two identical services run side by side for -duration, each with three
// in-process providers of which one answers UNAVAILABLE (a transient
// error) to everything until half of the run has passed, then recovers.
// Each service gets -rate calls/s through its own failback invoker: the
// baseline over the plain list, the other over a cluster.BreakerDirectory
// (breaker defaults, open timeout -open). It prints, per service: the
// calls made, the calls queued for retry (their first attempt failed), the
// share of those that succeeded on their first retry, the calls lost, the
// calls that reached the failing provider; and for the breaker: when it
// was ejected, the calls it received after that until it recovered (at
// most one probe per half-open interval), and how long after recovering
// it was back in selection.
//
// Usage:
//
//	go run ./examples/breaker [-duration 6s] [-rate 200] [-open 1s]
//
// It runs in real time; the same scenario in virtual time, with its
// targets checked, is TestBreakerScenarioOneDown in package failback.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
)

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 6*time.Second, "how long calls are made; the failing provider recovers at half of it")
	flag.IntVar(&cfg.rate, "rate", 200, "calls per second per service")
	flag.DurationVar(&cfg.open, "open", time.Second, "the breakers' open timeout")
	flag.Parse()
	if _, err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "breaker:", err)
		os.Exit(1)
	}
}

type config struct {
	duration time.Duration
	rate     int
	open     time.Duration
}

// result is one service's figures.
type result struct {
	name                                     string
	calls, queued, firstRetry, lost, failing int
	ejected, backIn                          time.Duration // -1: never
	afterEject, halfOpens                    int
}

var errUnavailable = rebound.Transient(errors.New("rpc error: code = Unavailable"))

// provider answers UNAVAILABLE while down, and records when it was called.
type provider struct {
	target string
	down   atomic.Bool
	mu     sync.Mutex
	calls  []time.Time
}

func (p *provider) Target() string { return p.target }
func (p *provider) Invoke(context.Context, *cluster.Invocation) (any, error) {
	p.mu.Lock()
	p.calls = append(p.calls, time.Now())
	p.mu.Unlock()
	if p.down.Load() {
		return nil, errUnavailable
	}
	return nil, nil
}

func (p *provider) between(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.After(from) && c.Before(to) {
			n++
		}
	}
	return n
}

// run runs both services side by side, prints the table to w and returns
// the figures (baseline first).
func run(cfg config, w io.Writer) ([]result, error) {
	if cfg.duration <= 0 || cfg.rate <= 0 || cfg.open <= 0 {
		return nil, fmt.Errorf("-duration, -rate and -open must be > 0")
	}
	results := make([]result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, withBreaker := range []bool{false, true} {
		wg.Go(func() { results[i], errs[i] = service(cfg, withBreaker) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "service\tcalls\tqueued\tfirst retry ok\tlost\tto the failing one\tejected after\tafter ejection\tback in after\t\n")
	for _, r := range results {
		ej, back, after := "-", "-", "-"
		if r.ejected >= 0 {
			ej = r.ejected.Round(time.Millisecond).String()
			after = fmt.Sprintf("%d in %d half-opens", r.afterEject, r.halfOpens)
		}
		if r.backIn >= 0 {
			back = r.backIn.Round(time.Millisecond).String()
		}
		pct := 100.0
		if r.queued > 0 {
			pct = 100 * float64(r.firstRetry) / float64(r.queued)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t\n", r.name, r.calls, r.queued, pct, r.lost, r.failing, ej, after, back)
	}
	return results, tw.Flush()
}

func service(cfg config, withBreaker bool) (result, error) {
	r := result{name: "baseline", ejected: -1, backIn: -1}
	ps := make([]*provider, 3)
	ivs := make([]cluster.Invoker, 3)
	for i := range ps {
		ps[i] = &provider{target: fmt.Sprintf("10.0.0.%d:20880", i+1)}
		ivs[i] = ps[i]
	}
	failing := ps[1]
	failing.down.Store(true)
	start := time.Now()
	recoverAt := start.Add(cfg.duration / 2)
	var mu sync.Mutex
	var ejectedAt, closedAt time.Time
	dir := cluster.NewStaticDirectory(ivs...)
	if withBreaker {
		r.name = "breaker"
		bd, err := cluster.NewBreakerDirectory(dir,
			cluster.WithBreakerSettings(func(string) gobreaker.Settings {
				return gobreaker.Settings{Timeout: cfg.open, IsSuccessful: func(err error) bool { return !failback.DefaultRetryable(err) }}
			},
				rebound.WithObserver(rebound.ObserverFunc(func(ev rebound.Event) {
					e, ok := ev.Detail.(cluster.BreakerEvent)
					if !ok {
						return
					}
					if e.Target != failing.target {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case e.To == gobreaker.StateOpen && ejectedAt.IsZero():
						ejectedAt = e.At
					case e.To == gobreaker.StateHalfOpen && e.At.Before(recoverAt):
						r.halfOpens++
					case e.To == gobreaker.StateClosed && !e.At.Before(recoverAt) && closedAt.IsZero():
						closedAt = e.At
					}
				}))))
		if err != nil {
			return r, err
		}
		dir = bd
	}
	var firstRetry atomic.Int64
	f, err := failback.New(dir, failback.WithMaxTasks(100000),
		failback.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: rebound.FullJitter}, rebound.WithMaxAttempts(4), rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind == rebound.EventRecovered && e.Attempt == 2 {
				firstRetry.Add(1)
			}
		}))))
	if err != nil {
		return r, err
	}
	tick := time.NewTicker(time.Second / time.Duration(cfg.rate))
	defer tick.Stop()
	inv := &cluster.Invocation{Method: "Notify"}
	for now := range tick.C {
		if now.Sub(start) >= cfg.duration {
			break
		}
		if failing.down.Load() && !now.Before(recoverAt) {
			failing.down.Store(false)
		}
		r.calls++
		if _, err := f.Invoke(context.Background(), inv); err != nil {
			return r, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Shutdown(ctx); err != nil { // the queued calls end first
		return r, err
	}
	st := f.Stats()
	r.queued = int(st.Offered)
	r.lost = int(st.GaveUp)
	for _, n := range st.Dropped {
		r.lost += int(n)
	}
	r.firstRetry = int(firstRetry.Load())
	r.failing = failing.between(start, recoverAt)
	mu.Lock()
	defer mu.Unlock()
	if !ejectedAt.IsZero() {
		r.ejected = ejectedAt.Sub(start)
		r.afterEject = failing.between(ejectedAt, recoverAt)
	}
	if !closedAt.IsZero() {
		r.backIn = closedAt.Sub(recoverAt)
	}
	return r, nil
}
