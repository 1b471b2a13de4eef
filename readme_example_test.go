package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// ExampleRetry_quickStart is docs/guide.md's first "Retry one operation"
// snippet: a Permanent error ends the loop at once, and the loop is logged
// through a logging.Loop. (The guide uses the zero Policy; here the
// delays are shortened so that the example runs quickly.) The README's own
// snippets are in readme_snippets_test.go.
func ExampleRetry_quickStart() {
	ctx := context.Background()
	logger := zap.NewNop() // yours
	errNotFound := errors.New("404 no such user")
	calls := 0
	call := func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("connection refused")
		}
		return errNotFound
	}
	isNotFound := func(err error) bool { return errors.Is(err, errNotFound) }

	p := rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond} // guide: rebound.Policy{}
	err := rebound.Retry(ctx, p, func(ctx context.Context) error {
		err := call(ctx)
		if isNotFound(err) {
			return rebound.Permanent(err) // retrying cannot help
		}
		return err
	}, rebound.WithObserver(logging.NewLoop(logger, "sync")))
	fmt.Println(calls, err, errors.Is(err, errNotFound), errors.Is(err, rebound.ErrExhausted))
	// Output: 3 404 no such user true false
}

// ExampleNewRetrier is docs/guide.md's second "Retry one operation" snippet:
// a Retrier compiled once with a shared RetryBudget and hooks.
func ExampleNewRetrier() {
	ctx := context.Background()
	budget, err := rebound.NewRetryBudget(0.2, 10, 10*time.Second) // retries at most 20% of calls + 10/s
	if err != nil {
		panic(err)
	}
	observe := func(e rebound.Event) {
		switch e.Kind {
		case rebound.EventRecovered:
			fmt.Println("recovered at attempt", e.Attempt)
		case rebound.EventGiveUp:
			fmt.Println("gave up:", e.Err)
		}
	}
	calls := 0
	call := func(context.Context) error {
		if calls++; calls < 2 {
			return errors.New("connection refused")
		}
		return nil
	}

	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond}, // guide: rebound.Policy{}
		rebound.WithBudget(budget),
		rebound.WithObserver(rebound.ObserverFunc(observe)))
	if err != nil {
		fmt.Println(err) // *rebound.ArgumentError naming the option and the rule
		return
	}
	err = r.Do(ctx, call)
	fmt.Println("err:", err)

	_, err = rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(&rebound.RetryBudget{}))
	fmt.Println(err)
	// Output:
	// recovered at attempt 2
	// err: <nil>
	// rebound.WithBudget: b is a zero RetryBudget, which is not usable: make it with NewRetryBudget
}
