package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

func ExamplePolicy() {
	p := rebound.Policy{Jitter: rebound.NoJitter} // else the zero value: 1s, doubling, capped at 30s, full jitter
	b := p.NewBackOff()                           // without jitter, each delay is its ceiling
	var delays []time.Duration
	for n := 0; n < 7; n++ {
		delays = append(delays, b.NextBackOff())
	}
	fmt.Println(delays)
	_, err := rebound.NewRetrier(rebound.Policy{Multiplier: 0.5})
	fmt.Println(err)
	// Output:
	// [1s 2s 4s 8s 16s 30s 30s]
	// rebound.NewRetrier: p breaks a Policy rule: rebound: invalid policy: Multiplier = 0.5: must be 0 (the default, 2) or at least 1
}

func ExamplePolicy_NewBackOff() {
	p := rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: rebound.NoJitter}
	b := p.NewBackOff(rebound.WithMaxAttempts(6)) // one per loop: a BackOff is not safe for concurrent use
	for d := b.NextBackOff(); d != backoff.Stop; d = b.NextBackOff() {
		fmt.Print(d, " ")
	}
	fmt.Println("stop")
	// Output: 100ms 200ms 400ms 800ms 1s stop
}

func ExampleRetry() {
	calls := 0
	err := rebound.Retry(context.Background(), rebound.Policy{Initial: time.Millisecond, Max: 5 * time.Millisecond},
		func(ctx context.Context) error {
			calls++
			if calls < 3 {
				return errors.New("connection refused")
			}
			return nil
		},
		rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind != rebound.EventAttempt { // retry, recovered: the outcome of each attempt
				fmt.Printf("%s: attempt %d: %v\n", e.Kind, e.Attempt, e.Err)
			}
		})))
	fmt.Println("err:", err)
	// Output:
	// retry: attempt 1: connection refused
	// retry: attempt 2: connection refused
	// recovered: attempt 3: <nil>
	// err: <nil>
}

func ExamplePermanent() {
	errNotFound := errors.New("no such user")
	calls := 0
	err := rebound.Retry(context.Background(), rebound.Policy{}, func(ctx context.Context) error {
		calls++
		return rebound.Permanent(errNotFound) // retrying cannot help
	})
	fmt.Println(calls, err, errors.Is(err, errNotFound))
	// Output: 1 no such user true
}

func ExampleRetryAfter() {
	p := rebound.Policy{Initial: time.Millisecond}
	err := rebound.Retry(context.Background(), p, func(ctx context.Context) error {
		// The server says: come back in a minute. That does not fit in
		// MaxElapsed, so Retry returns at once and says why.
		return rebound.RetryAfter(time.Minute, errors.New("503 overloaded"))
	}, rebound.WithMaxElapsed(time.Second))
	fmt.Println(errors.Is(err, rebound.ErrExhausted))
	fmt.Println(err)
	// Output:
	// true
	// rebound: gave up after 1 attempt: rebound: retries exhausted: server asked to retry after 1m0s, beyond MaxElapsed 1s: 503 overloaded (retry after 1m0s)
}

func ExampleRetrier() {
	// Build once (policy and options validated here), use from any goroutine.
	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond, Max: 5 * time.Millisecond},
		rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			switch e.Kind {
			case rebound.EventRetry:
				fmt.Printf("attempt %d failed: %v\n", e.Attempt, e.Err)
			case rebound.EventRecovered:
				fmt.Printf("recovered at attempt %d\n", e.Attempt)
			}
		})))
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	err = r.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	fmt.Println("err:", err)

	_, err = rebound.NewRetrier(rebound.Policy{}, rebound.WithLimiter(rate.NewLimiter(10, 0)))
	fmt.Println(err)
	// Output:
	// attempt 1 failed: connection refused
	// attempt 2 failed: connection refused
	// recovered at attempt 3
	// err: <nil>
	// rebound.WithLimiter: l has burst 0 at limit 10: it can never grant a token; the burst must be >= 1
}

// A Schedule drives one loop by hand: Admit, make the attempt, report it
// with Done, and read each Decision. Time is passed in: this one runs in
// made-up time, as a scheduler with a heap of due times or a simulator
// would.
func ExampleSchedule() {
	r, _ := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(5))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Hour) // the caller's
	s := r.NewSchedule(now)
	call := func(n int) error { // fails five times
		if n == 1 {
			return rebound.RetryAfter(4294967295*time.Second, errors.New("503")) // clamped to MaxRetryAfter (5m)
		}
		return errors.New("refused")
	}
	for n := 0; ; {
		a, d := s.Admit(now)
		if !d.Stop && d.Delay == 0 { // admitted: make the attempt now
			d = a.Done(call(n), now)
			n++
		}
		if d.Stop { // the run is over
			fmt.Println("stop:", d.Err)
			break
		}
		if now.Add(d.Delay).After(deadline) { // the caller gives up
			s.Cancel(now) // what is held for the attempt goes back
			break
		}
		fmt.Printf("attempt %d failed, next in %v\n", d.Attempt, d.Delay)
		now = now.Add(d.Delay) // wait Delay, then Admit again
	}
	// Output:
	// attempt 1 failed, next in 1s
	// attempt 2 failed, next in 5m0s
	// attempt 3 failed, next in 4s
	// attempt 4 failed, next in 8s
	// stop: rebound: gave up after 5 attempts: rebound: retries exhausted: refused
}

func ExampleRetryBudget() {
	// Retries at most 20% of the first attempts, no floor, over 10 s,
	// across every loop that shares it through WithBudget.
	b, _ := rebound.NewRetryBudget(0.2, 0, 10*time.Second)
	r, _ := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond}, rebound.WithBudget(b), rebound.WithMaxAttempts(2))
	ctx := context.Background()
	for i := 0; i < 10; i++ { // ten calls that succeed: two retries earned
		_ = r.Do(ctx, func(ctx context.Context) error { return nil })
	}
	var err error
	for i := 0; i < 3; i++ { // three calls that fail: each asks for a retry
		err = r.Do(ctx, func(ctx context.Context) error { return errors.New("refused") })
		fmt.Println(errors.Is(err, rebound.ErrBudgetExhausted))
	}
	fmt.Println(err)
	// Output:
	// false
	// false
	// true
	// rebound: gave up after 1 attempt: rebound: retry budget exhausted: too many retries for the requests sent recently: refused
}

func ExampleAdaptiveThrottle() {
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, rand.NewPCG(1, 1)) // K = 2, 2 min window; seeded draws
	r, _ := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond}, rebound.WithThrottle(th), rebound.WithMaxAttempts(1))
	ctx := context.Background()
	sent := 0
	for i := 0; i < 20; i++ { // 20 requests, half accepted: nothing is rejected locally
		_ = r.Do(ctx, func(ctx context.Context) error {
			sent++
			if i%2 == 0 {
				return nil
			}
			return errors.New("overloaded")
		})
	}
	fmt.Println("sent", sent, "of 20")
	rejected := 0
	for i := 0; i < 20; i++ { // the backend rejects everything: some are rejected locally
		err := r.Do(ctx, func(ctx context.Context) error { return errors.New("overloaded") })
		if errors.Is(err, rebound.ErrThrottled) {
			rejected++
		}
	}
	fmt.Println("rejected locally", rejected, "of 20")
	// Output:
	// sent 20 of 20
	// rejected locally 7 of 20
}

func ExampleNewQueue() {
	// A slow observer (a remote sink, say) behind a Queue: the loop hands
	// each event over without waiting; Shutdown delivers what is queued.
	slow := rebound.ObserverFunc(func(e rebound.Event) {
		if e.Kind == rebound.EventRetry || e.Kind == rebound.EventRecovered {
			fmt.Println(e.Kind, e.Attempt)
		}
	})
	q, err := rebound.NewQueue(slow, 100, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	_ = rebound.Retry(context.Background(), rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond},
		func(context.Context) error {
			if calls++; calls < 2 {
				return errors.New("connection refused")
			}
			return nil
		}, rebound.WithObserver(q))
	_ = q.Shutdown(context.Background())
	fmt.Println("dropped:", q.Dropped())
	// Output:
	// retry 1
	// recovered 2
	// dropped: 0
}
