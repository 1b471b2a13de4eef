package rebound_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// Bad values a new user can pass without a compile error: each is a
// constructor error naming the argument, never a panic later.
func TestBadInputsAreArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		f          func() error
	}{
		{"WithBudget(zero RetryBudget)", "rebound.WithBudget: b is a zero RetryBudget", func() error {
			_, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(&rebound.RetryBudget{}))
			return err
		}},
		{"WithThrottle(zero AdaptiveThrottle)", "rebound.WithThrottle: t is a zero AdaptiveThrottle", func() error {
			_, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithThrottle(&rebound.AdaptiveThrottle{}))
			return err
		}},
		{"Retry WithBudget(zero RetryBudget)", "rebound.WithBudget: b is a zero RetryBudget", func() error {
			return rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { return nil },
				rebound.WithBudget(&rebound.RetryBudget{}))
		}},
		{"Attempt{}.Done", "rebound.Attempt.Done: a is the zero Attempt", func() error {
			return rebound.Attempt{}.Done(errBoom, t0).Err
		}},
		{"Schedule{}.Admit", "rebound.Schedule.Admit: s is a zero Schedule", func() error {
			_, d := (&rebound.Schedule{}).AdmitKind(t0, rebound.FirstAttempt)
			return d.Err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f()
			var ae *rebound.ArgumentError
			if !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an *ArgumentError containing %q", err, tc.want)
			}
		})
	}
	// The constructed values are accepted.
	b, _ := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(b), rebound.WithThrottle(th)); err != nil {
		t.Fatal(err)
	}
}
