package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

func ExamplePolicy() {
	p := rebound.Policy{} // the zero value: 1s, doubling, capped at 30s, full jitter
	var ceilings []time.Duration
	for n := 0; n < 7; n++ {
		ceilings = append(ceilings, p.Ceiling(n))
	}
	fmt.Println(ceilings)
	fmt.Println(rebound.Policy{Multiplier: 0.5}.Validate())
	// Output:
	// [1s 2s 4s 8s 16s 30s 30s]
	// rebound: invalid policy: Multiplier = 0.5: must be 0 (the default, 2) or at least 1
}

func ExamplePolicy_NewBackOff() {
	p := rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: rebound.NoJitter, MaxAttempts: 6}
	b := p.NewBackOff() // one per loop: a BackOff is not safe for concurrent use
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
		rebound.WithNotify(func(e rebound.Event) {
			fmt.Printf("%s: attempt %d: %v\n", e.Kind, e.Attempt, e.Err)
		}))
	fmt.Println("err:", err)
	// Output:
	// retry: attempt 1: connection refused
	// retry: attempt 2: connection refused
	// success: attempt 3: <nil>
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
	p := rebound.Policy{Initial: time.Millisecond, MaxElapsed: time.Second}
	err := rebound.Retry(context.Background(), p, func(ctx context.Context) error {
		// The server says: come back in a minute. That does not fit in
		// MaxElapsed, so Retry returns at once and says why.
		return rebound.RetryAfter(time.Minute, errors.New("503 overloaded"))
	})
	fmt.Println(errors.Is(err, rebound.ErrExhausted))
	fmt.Println(err)
	// Output:
	// true
	// rebound: gave up after 1 attempt: rebound: retries exhausted: server asked to retry after 1m0s, beyond MaxElapsed 1s: 503 overloaded (retry after 1m0s)
}
