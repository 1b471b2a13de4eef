package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

// failThen returns an op that fails n times with err, each attempt taking
// d of (virtual) time, then succeeds.
func failThen(n int, err error, d time.Duration) func(context.Context) error {
	calls := 0
	return func(context.Context) error {
		time.Sleep(d)
		if calls++; calls <= n {
			return err
		}
		return nil
	}
}

// Retry's fast path (observers and meters only) reports what a Retrier
// with the same options reports, event for event and field for field,
// whatever the options' order, with the same observer given twice, nil
// options between them, a zero MaxElapsed or not, and a first attempt
// that succeeds or fails.
func TestRetryFastPathMatchesRetrier(t *testing.T) {
	errBusy := errors.New("busy")
	for _, maxEl := range []time.Duration{0, time.Hour} {
		for _, fails := range []int{0, 1, 3} {
			synctest.Test(t, func(t *testing.T) {
				var got []string
				rec := func(name string) rebound.ObserverFunc {
					return func(e rebound.Event) {
						got = append(got, fmt.Sprintf("%s:%v a%d err=%v el=%v wait=%v delay>0=%v", name, e.Kind, e.Attempt, e.Err, e.Elapsed, e.Waiting, e.Delay > 0))
					}
				}
				a := rebound.WithObserver(rec("a"))
				h := rebound.WithObserver(rebound.Hooks{Attempted: rec("h"), Recovered: rec("h")})
				opts := []rebound.Option{a, nil, h, a, rebound.WithMaxAttempts(5), rebound.WithMaxElapsed(maxEl)}
				p := rebound.Policy{Initial: rebound.MinDelay, Max: rebound.MinDelay}
				errRetry := rebound.Retry(context.Background(), p, failThen(fails, errBusy, time.Second), opts...)
				fast := got
				got = nil
				r, err := rebound.NewRetrier(p, opts...)
				if err != nil {
					t.Fatal(err)
				}
				errDo := r.Do(context.Background(), failThen(fails, errBusy, time.Second))
				if fmt.Sprint(errRetry) != fmt.Sprint(errDo) {
					t.Errorf("MaxElapsed %v, %d failures: Retry returned %v, Retrier.Do %v", maxEl, fails, errRetry, errDo)
				}
				if fmt.Sprint(fast) != fmt.Sprint(got) {
					t.Errorf("MaxElapsed %v, %d failures:\nRetry        %q\nRetrier.Do   %q", maxEl, fails, fast, got)
				}
				if len(fast) != 5*fails+3+3*btoi(fails > 0) {
					t.Errorf("MaxElapsed %v, %d failures: %d events %q", maxEl, fails, len(fast), fast)
				}
			})
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// If several WithMeterProvider options are given, the last one applies,
// in Retry's fast path, when its first attempt fails, and in a Retrier.
func TestRetryLastMeterWins(t *testing.T) {
	errBusy := errors.New("busy")
	r1, r2 := sdkmetric.NewManualReader(), sdkmetric.NewManualReader()
	m1 := rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r1)))
	m2 := rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r2)))
	p := rebound.Policy{Initial: rebound.MinDelay, Max: rebound.MinDelay}
	obs := rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {}))
	for _, fails := range []int{0, 1} {
		if err := rebound.Retry(context.Background(), p, failThen(fails, errBusy, 0), m1, obs, m2, rebound.WithMaxAttempts(3)); err != nil {
			t.Fatal(err)
		}
		r, err := rebound.NewRetrier(p, m1, obs, m2, rebound.WithMaxAttempts(3))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Do(context.Background(), failThen(fails, errBusy, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range telemetrytest.Collect(t, r1)["rebound.retry.attempts"] {
		if v != 0 {
			t.Errorf("first meter recorded %s = %d, want nothing (the last meter applies)", k, v)
		}
	}
	got := telemetrytest.Collect(t, r2)["rebound.retry.attempts"]
	if got["outcome=success"] != 4 || got["outcome=retry"] != 2 {
		t.Errorf("last meter recorded %v, want 4 successes and 2 retries", got)
	}
}

// An observer may call Retry with the same options from inside Observe
// (re-entrantly, on the same goroutine): each call reports its own
// events, and nothing deadlocks.
func TestRetryObserverReentrant(t *testing.T) {
	var depth, events atomic.Int32
	var opt rebound.Option
	opt = rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
		events.Add(1)
		if depth.Add(1) < 3 {
			if err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { return nil }, opt); err != nil {
				t.Error(err)
			}
		}
	}))
	if err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { return nil }, opt); err != nil {
		t.Fatal(err)
	}
	if events.Load() != 3 {
		t.Errorf("%d events, want 3 (one per nested Retry)", events.Load())
	}
}

// A panic in an observer reaches Retry's caller (it is not recovered),
// and the option it came in is as good as before for the next call.
func TestRetryObserverPanicPropagates(t *testing.T) {
	boom := true
	var heard int
	opt := rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {
		heard++
		if boom {
			panic("observer")
		}
	}))
	for _, fails := range []int{0, 1} {
		boom = true
		func() {
			defer func() {
				if r := recover(); r != "observer" {
					t.Errorf("%d failures: recovered %v, want the observer's panic", fails, r)
				}
			}()
			_ = rebound.Retry(context.Background(), rebound.Policy{Initial: rebound.MinDelay}, failThen(fails, errors.New("x"), 0), opt, rebound.WithMaxAttempts(2))
		}()
		boom, heard = false, 0
		if err := rebound.Retry(context.Background(), rebound.Policy{Initial: rebound.MinDelay}, failThen(fails, errors.New("x"), 0), opt, rebound.WithMaxAttempts(2)); err != nil {
			t.Fatal(err)
		}
		if want := 1 + 3*fails; heard != want {
			t.Errorf("%d failures, after a panic: %d events, want %d", fails, heard, want)
		}
	}
}

// One Retrier with two observers and a meter, used by many goroutines at
// once (run with -race): every event reaches every observer.
func TestRetrierObserversConcurrent(t *testing.T) {
	var a, h atomic.Int64
	reader := sdkmetric.NewManualReader()
	r, err := rebound.NewRetrier(rebound.Policy{Initial: rebound.MinDelay, Max: rebound.MinDelay},
		rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) { a.Add(1) })),
		rebound.WithObserver(rebound.Hooks{Attempted: func(rebound.Event) { h.Add(1) }}), rebound.WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	const g, n = 8, 50
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for j := range n {
				fails := (i + j) % 2
				if err := r.Do(context.Background(), failThen(fails, errors.New("x"), 0)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Half the calls fail once: attempt, retry, attempt, recovered.
	if a.Load() != g*n/2*1+g*n/2*4 || h.Load() != g*n/2*1+g*n/2*2 {
		t.Errorf("observer heard %d events, hooks %d attempts; want %d and %d", a.Load(), h.Load(), g*n/2*5, g*n/2*3)
	}
	if got := telemetrytest.Collect(t, reader)["rebound.retry.attempts"]; got["outcome=success"] != g*n || got["outcome=retry"] != g*n/2 {
		t.Errorf("meter %v, want %d successes, %d retries", got, g*n, g*n/2)
	}
}
