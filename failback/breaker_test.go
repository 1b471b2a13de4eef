package failback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// errUnavailable is what a provider whose deploy is broken answers to
// everything (gRPC's UNAVAILABLE, marked transient as reboundgrpc does).
var errUnavailable = rebound.Transient(errors.New("rpc error: code = Unavailable desc = connection refused"))

// bkProvider answers UNAVAILABLE while down is set, and counts the calls
// (first attempts and retries) it received, with their times.
type bkProvider struct {
	target string
	down   atomic.Bool
	mu     sync.Mutex
	calls  []time.Time
}

func (p *bkProvider) Target() string { return p.target }
func (p *bkProvider) Invoke(ctx context.Context, _ *cluster.Invocation) (any, error) {
	p.mu.Lock()
	p.calls = append(p.calls, time.Now())
	p.mu.Unlock()
	if p.down.Load() {
		return nil, errUnavailable
	}
	return nil, nil
}

func (p *bkProvider) callsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if !c.Before(from) && c.Before(to) {
			n++
		}
	}
	return n
}

func bkProviders(n int) ([]*bkProvider, cluster.Directory) {
	ps := make([]*bkProvider, n)
	ivs := make([]cluster.Invoker, n)
	for i := range ps {
		ps[i] = &bkProvider{target: fmt.Sprintf("10.0.0.%d:20880", i+1)}
		ivs[i] = ps[i]
	}
	return ps, cluster.NewStaticDirectory(ivs...)
}

var bkPolicy = rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: rebound.FullJitter}

// bkLimit is bkPolicy's limit.
var bkLimit = rebound.WithMaxAttempts(4)

// With no target admitted by a breaker, a retry waits until the earliest
// half-open instead of spending an attempt; the wait is in the hooks and
// in Stats. Before: the three retries of a call to a lone provider whose
// breaker is open all failed with ErrNoInvokers at once and the call gave
// up without reaching the provider again.
func TestBreakerRetryWaitsForHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps, inner := bkProviders(1)
		ps[0].down.Store(true)
		dir, err := cluster.NewBreakerDirectory(inner, tripAfter(1, 10*time.Second, DefaultRetryable),
			cluster.WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var retried []Task
		var succeeded []Task
		f := mustNew(t, dir, WithPolicy(bkPolicy, bkLimit), withObserver(testHooks{
			Retried:   func(tk Task) { mu.Lock(); retried = append(retried, tk); mu.Unlock() },
			Succeeded: func(tk Task) { mu.Lock(); succeeded = append(succeeded, tk); mu.Unlock() },
		}))
		defer mustClose(t, f)
		start := time.Now()
		if _, err := f.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		st := f.Stats()
		if st.BreakerWaits != 1 || st.Retried != 0 || st.Queued != 1 {
			t.Fatalf("5 s in: %+v, want 1 breaker wait, no retry sent, the call queued", st)
		}
		mu.Lock()
		if len(retried) != 1 || retried[0].Attempts != 1 {
			t.Fatalf("Retried hooks %+v, want one with Attempts 1", retried)
		}
		var boe *cluster.BreakerOpenError
		if !errors.As(retried[0].Err, &boe) {
			t.Fatalf("Retried Err %v, want a *cluster.BreakerOpenError", retried[0].Err)
		}
		if d := retried[0].Delay; d < 9*time.Second || d > 10*time.Second {
			t.Errorf("Retried Delay %v, want the rest of the 10 s open timeout", d)
		}
		mu.Unlock()
		ps[0].down.Store(false)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(succeeded) != 1 || succeeded[0].Attempts != 2 {
			t.Fatalf("Succeeded %+v, want the call on its first retry (Attempts 2)", succeeded)
		}
		if at := ps[0].calls[1].Sub(start); at < 10*time.Second || at > 10*time.Second+10*time.Millisecond {
			t.Errorf("the retry reached the provider %v after the first attempt, want at the half-open (10 s)", at)
		}
		if st := f.Stats(); st.Succeeded != 1 || st.Retried != 1 {
			t.Errorf("end: %+v, want 1 retry, 1 success", st)
		}
	})
}

// Two retries racing for one half-open probe: the one refused by the
// breaker is not an attempt; it waits and goes elsewhere or later.
func TestBreakerRefusedRetryNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps, inner := bkProviders(1)
		dir, _ := cluster.NewBreakerDirectory(inner, tripAfter(1, time.Second, nil), cluster.WithMaxEjected(1))
		ivs, _ := dir.List(context.Background(), &cluster.Invocation{})
		stale := ivs[0]
		ps[0].down.Store(true)
		_, _ = stale.Invoke(context.Background(), &cluster.Invocation{}) // opens the breaker
		f := mustNew(t, &fixedDir{ivs: []cluster.Invoker{stale}}, WithPolicy(bkPolicy, bkLimit))
		defer mustClose(t, f)
		if _, err := f.Invoke(context.Background(), &cluster.Invocation{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // the retry is due (bkPolicy: at most 100 ms), the breaker still open
		synctest.Wait()
		if st := f.Stats(); st.BreakerWaits != 1 || st.Retried != 0 || st.Queued != 1 {
			t.Fatalf("%+v: want the retry refused by the breaker waiting, not counted as sent", st)
		}
		ps[0].down.Store(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := f.Stats(); st.Succeeded != 1 || st.Retried != 1 {
			t.Errorf("%+v: want the call succeeded on one retry after the half-open", st)
		}
	})
}

// fixedDir lists a fixed slice as is (the invokers of a BreakerDirectory
// listed earlier, standing for a caller that raced).
type fixedDir struct{ ivs []cluster.Invoker }

func (d *fixedDir) List(context.Context, *cluster.Invocation) ([]cluster.Invoker, error) {
	return d.ivs, nil
}

// scenario is one run of 3 providers at 200 calls/s through failback.
type scenario struct {
	offered, queued, firstRetry, succeeded, gaveUp, dropped int
	breakerWaits                                            uint64
	ejectedAfter, closedAfter                               time.Duration // -1: never
	failingAfterEject, halfOpens                            int
	failingCalls                                            int // calls the failing providers received before recovering
	maxEjected                                              int
	sent                                                    int    // calls the providers received, first attempts included
	throttled                                               uint64 // retries the throttle rejected locally
}

// runScenario sends 200 calls/s for run through failback over 3 providers,
// down[i] telling which answer UNAVAILABLE to everything; the providers
// in recover come back at recoverAt. With breaker, the directory has a
// breaker per target (open timeout 2 s).
func runScenario(t *testing.T, breaker bool, down []bool, run, recoverAt time.Duration, opts ...func() Option) scenario {
	var sc scenario
	synctest.Test(t, func(t *testing.T) {
		ps, inner := bkProviders(3)
		for i, d := range down {
			ps[i].down.Store(d)
		}
		const openTimeout = 2 * time.Second
		start := time.Now()
		var ejectedAt, closedAt time.Time
		var mu sync.Mutex
		dir := inner
		var bd *cluster.BreakerDirectory
		if breaker {
			var err error
			bd, err = cluster.NewBreakerDirectory(inner, tripAfter(0, openTimeout, DefaultRetryable,
				rebound.WithObserver(rebound.ObserverFunc(func(ev rebound.Event) {
					e, ok := ev.Detail.(cluster.BreakerEvent)
					if !ok {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case e.To == gobreaker.StateOpen && ejectedAt.IsZero():
						ejectedAt = e.At
					case e.To == gobreaker.StateHalfOpen && e.At.Sub(start) < recoverAt:
						sc.halfOpens++
					case e.To == gobreaker.StateClosed && !ejectedAt.IsZero() && e.At.Sub(start) >= recoverAt:
						if closedAt.IsZero() {
							closedAt = e.At
						}
					}
				}))))
			if err != nil {
				t.Fatal(err)
			}
			dir = bd
		}
		var firstRetry atomic.Int64
		fopts := []Option{WithPolicy(bkPolicy, bkLimit), WithMaxTasks(100000), withSeed(1),
			withObserver(testHooks{Succeeded: func(tk Task) {
				if tk.Attempts == 2 {
					firstRetry.Add(1)
				}
			}})}
		for _, o := range opts {
			fopts = append(fopts, o()) // built in the bubble
		}
		f := mustNew(t, dir, fopts...)
		recovered := false
		for time.Since(start) < run {
			if !recovered && time.Since(start) >= recoverAt {
				recovered = true
				for _, p := range ps {
					p.down.Store(false)
				}
			}
			sc.offered++
			if _, err := f.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"}); err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if bd != nil {
				n := 0
				for _, s := range bd.Open() { // an ejected target's breaker is not closed
					if s.Ejected {
						n++
					}
				}
				sc.maxEjected = max(sc.maxEjected, n)
			}
			time.Sleep(5 * time.Millisecond) // 200 calls/s
		}
		time.Sleep(30 * time.Second) // let the queued calls end
		synctest.Wait()
		st := f.Stats()
		mustClose(t, f)
		sc.throttled = st.Throttled
		for _, p := range ps {
			sc.sent += p.callsBetween(start, start.Add(time.Hour))
		}
		sc.queued = int(st.Offered)
		sc.succeeded, sc.gaveUp = int(st.Succeeded), int(st.GaveUp)
		for _, n := range st.Dropped {
			sc.dropped += int(n)
		}
		sc.breakerWaits = st.BreakerWaits
		sc.firstRetry = int(firstRetry.Load())
		sc.ejectedAfter, sc.closedAfter = -1, -1
		for i, d := range down {
			if d {
				sc.failingCalls += ps[i].callsBetween(start, start.Add(recoverAt))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !ejectedAt.IsZero() {
			sc.ejectedAfter = ejectedAt.Sub(start)
			for i, d := range down {
				if d {
					sc.failingAfterEject += ps[i].callsBetween(ejectedAt.Add(time.Nanosecond), start.Add(recoverAt))
				}
			}
		}
		if !closedAt.IsZero() {
			sc.closedAfter = closedAt.Sub(start) - recoverAt
		}
	})
	return sc
}

// TestBreakerScenarioOneDown: one of three providers answers UNAVAILABLE
// to everything at 200 calls/s, with the no-breaker baseline in the same
// run. Figures are logged (go test -v -run Scenario ./failback/).
func TestBreakerScenarioOneDown(t *testing.T) {
	const run, recoverAt, openTimeout = 10 * time.Second, 5 * time.Second, 2 * time.Second
	down := []bool{false, true, false}
	base := runScenario(t, false, down, run, recoverAt)
	br := runScenario(t, true, down, run, recoverAt)
	for _, r := range []struct {
		name string
		s    scenario
	}{{"baseline", base}, {"breaker", br}} {
		s := r.s
		t.Logf("%-8s calls %d, queued %d, succeeded on the first retry %d (%.1f%%), succeeded %d, gave up %d, dropped %d, breaker waits %d, calls to the failing provider %d",
			r.name, s.offered, s.queued, s.firstRetry, pct(s.firstRetry, s.queued), s.succeeded, s.gaveUp, s.dropped, s.breakerWaits, s.failingCalls)
	}
	t.Logf("breaker: ejected %v after the start; calls to the failing provider after ejection (until it recovered) %d over %d half-open intervals; back in selection %v after it recovered (open timeout %v)",
		br.ejectedAfter, br.failingAfterEject, br.halfOpens, br.closedAfter, openTimeout)
	if br.ejectedAfter < 0 || br.ejectedAfter > time.Second {
		t.Errorf("ejected after %v, want within 1 s", br.ejectedAfter)
	}
	if p := pct(br.firstRetry, br.queued); p < 99 {
		t.Errorf("%.1f%% of queued calls succeeded on their first retry, want >= 99%%", p)
	}
	if br.failingAfterEject > br.halfOpens {
		t.Errorf("%d calls reached the failing provider after ejection over %d half-open intervals, want at most one probe each",
			br.failingAfterEject, br.halfOpens)
	}
	if br.closedAfter < 0 || br.closedAfter > 2*openTimeout {
		t.Errorf("back in selection %v after recovering, want within %v", br.closedAfter, 2*openTimeout)
	}
	if br.queued >= base.queued {
		t.Errorf("breaker queued %d calls, baseline %d: the breaker should spare first attempts", br.queued, base.queued)
	}
	for _, s := range []scenario{base, br} {
		if s.succeeded+s.gaveUp+s.dropped != s.queued || s.gaveUp+s.dropped != 0 {
			t.Errorf("%+v: every queued call should succeed", s)
		}
	}
}

// TestBreakerScenarioAllDown: all three failing. Nothing ejected beyond
// the share (1 of 3), and nothing lost that the policy would have kept:
// every call ends by its policy, as in the baseline.
func TestBreakerScenarioAllDown(t *testing.T) {
	const run = 3 * time.Second
	down := []bool{true, true, true}
	base := runScenario(t, false, down, run, time.Hour)
	br := runScenario(t, true, down, run, time.Hour)
	t.Logf("baseline: calls %d, queued %d, gave up %d, dropped %d", base.offered, base.queued, base.gaveUp, base.dropped)
	t.Logf("breaker:  calls %d, queued %d, gave up %d, dropped %d, breaker waits %d, most ejected at once %d of 3",
		br.offered, br.queued, br.gaveUp, br.dropped, br.breakerWaits, br.maxEjected)
	if br.maxEjected > 1 {
		t.Errorf("%d of 3 ejected at once, want at most 1 (share 0.5)", br.maxEjected)
	}
	if br.queued != br.offered || br.gaveUp != br.queued || br.dropped != 0 {
		t.Errorf("breaker: %+v: every call should be queued and end by its policy (GaveUp), none dropped", br)
	}
	if base.gaveUp != base.queued || base.dropped != 0 {
		t.Errorf("baseline: %+v", base)
	}

	// With an adaptive throttle the retries are paced: fewer reach the
	// providers, and still no call is lost that the policy would keep.
	throttle := func() Option {
		th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		return withThrottle(th)
	}
	paced := runScenario(t, true, down, run, time.Hour, throttle)
	t.Logf("breaker and throttle: calls %d, sent to the providers %d (without the throttle %d), rejected locally %d, gave up %d, dropped %d, most ejected at once %d of 3",
		paced.offered, paced.sent, br.sent, paced.throttled, paced.gaveUp, paced.dropped, paced.maxEjected)
	if paced.sent >= br.sent || paced.throttled == 0 {
		t.Errorf("the throttle did not pace the retries: %d sent (%d without it), %d rejected locally", paced.sent, br.sent, paced.throttled)
	}
	if paced.maxEjected > 1 || paced.dropped != 0 || paced.gaveUp != paced.queued {
		t.Errorf("breaker and throttle: %+v: want at most 1 ejected, every call ended by its policy", paced)
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

// Invoke's success path allocates nothing with a breaker per target.
func TestBreakerInvokeSuccessNoAlloc(t *testing.T) {
	dir, _ := cluster.NewBreakerDirectory(okDir())
	f := mustNew(t, dir)
	defer mustClose(t, f)
	ctx, inv := context.Background(), &cluster.Invocation{Method: "Notify"}
	if allocs := testing.AllocsPerRun(1000, func() { _, _ = f.Invoke(ctx, inv) }); allocs != 0 {
		t.Errorf("%v allocations per successful Invoke with a breaker, want 0", allocs)
	}
}

// BenchmarkInvokeBreaker is a successful Invoke in the same run: without
// a breaker (baseline), with gobreaker's Execute around each call (the
// per-call cost of BreakerDirectory before its closed state got a
// lock-free path: gobreaker directly, over a static directory), and
// through a BreakerDirectory (breaker). cpu-ns/op is the process's CPU
// time per call (a coarse clock: run at least 0.5 s).
func BenchmarkInvokeBreaker(b *testing.B) {
	ctx, inv := context.Background(), &cluster.Invocation{Method: "Notify"}
	for _, name := range []string{"baseline", "gobreaker", "breaker"} {
		b.Run(name, func(b *testing.B) {
			dir := okDir()
			switch name {
			case "gobreaker":
				dir = gobreakerDir()
			case "breaker":
				dir, _ = cluster.NewBreakerDirectory(dir)
			}
			f := mustNew(b, dir)
			defer mustClose(b, f)
			b.ReportAllocs()
			cpu0, n := cpuTime(), 0
			for b.Loop() {
				_, _ = f.Invoke(ctx, inv)
				n++
			}
			// CPU time, not wall time: on a shared machine the wall clock
			// also counts the time other processes held the core.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
		})
	}
}

// gobreakerInvoker calls its provider through gobreaker's Execute.
type gobreakerInvoker struct {
	p  okProvider
	cb *gobreaker.CircuitBreaker[any]
}

func (g *gobreakerInvoker) Target() string { return g.p.Target() }
func (g *gobreakerInvoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	return g.cb.Execute(func() (any, error) { return g.p.Invoke(ctx, inv) })
}

func gobreakerDir() cluster.Directory {
	var ivs []cluster.Invoker
	for _, a := range []string{"10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"} {
		ivs = append(ivs, &gobreakerInvoker{p: okProvider(a), cb: gobreaker.NewCircuitBreaker[any](gobreaker.Settings{Name: a})})
	}
	return cluster.NewStaticDirectory(ivs...)
}

// okProvider answers every call with success, recording nothing.
type okProvider string

func (p okProvider) Target() string { return string(p) }
func (okProvider) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, nil
}

func okDir() cluster.Directory {
	return cluster.NewStaticDirectory(okProvider("10.0.0.1:20880"), okProvider("10.0.0.2:20880"), okProvider("10.0.0.3:20880"))
}

// tripAfter is the cluster.WithBreakerSettings of a breaker that trips
// after n consecutive failures (0: the directory's default, 5) and stays
// open for open; failure, if not nil, says which errors are failures.
func tripAfter(n uint32, open time.Duration, failure func(error) bool, opts ...rebound.Option) cluster.Option {
	return cluster.WithBreakerSettings(func(string) gobreaker.Settings {
		st := gobreaker.Settings{Timeout: open}
		if n > 0 {
			st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n }
		}
		if failure != nil {
			st.IsSuccessful = func(err error) bool { return !failure(err) }
		}
		return st
	}, opts...)
}
