package rebound

import (
	"errors"
	"github.com/rebound-go/rebound/internal/nilness"
)

// A Breaker is a circuit breaker that a loop asks before every attempt,
// beside the limiter, the budget and the throttle: Allow either admits the
// attempt, returning done, which the loop calls with the attempt's error
// (nil for a success) once it has ended, or refuses it with an error.
// github.com/sony/gobreaker/v2's *TwoStepCircuitBreaker[T] is a Breaker as
// it is:
//
//	cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
//		IsSuccessful: func(err error) bool { return !rebound.IsTransient(err) }, // a business error is not an outage
//	})
//	r, err := rebound.NewRetrier(p, rebound.WithBreaker(cb))
//
// Its Settings decide what counts as a failure (IsSuccessful,
// IsExcluded): the loop passes done the attempt's own error. An attempt
// that was admitted but will not be made (the loop stops or restarts
// between Admit and the attempt) is reported as context.Canceled, which
// Settings.IsExcluded may leave uncounted.
type Breaker interface {
	Allow() (done func(err error), err error)
}

// ErrBreakerOpen is matched by the *BreakerError of an attempt a Breaker
// refused (see WithBreaker).
var ErrBreakerOpen = errors.New("rebound: circuit breaker open: the attempt was not sent")

// BreakerError is an attempt refused by the loop's Breaker: it was not
// sent. It matches ErrBreakerOpen and the breaker's own error (for
// gobreaker, ErrOpenState or ErrTooManyRequests).
type BreakerError struct{ Err error }

func (e *BreakerError) Error() string { return ErrBreakerOpen.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrBreakerOpen and the breaker's error.
func (e *BreakerError) Unwrap() []error { return []error{ErrBreakerOpen, e.Err} }

// WithBreaker makes every attempt of the loop, the first included, ask b
// first (see Breaker), after the throttle and the limiter token: an
// attempt b refuses is not made and is handled exactly like one the
// AdaptiveThrottle rejects (see Schedule, "Adaptive throttling"): it
// counts as a failed attempt (toward MaxAttempts and MaxElapsed, error a
// *BreakerError), is reported to Hooks.Throttled, and the loop backs off by
// the policy's next delay and asks again; the loop ends only when its
// policy runs out (a *RetryError with Reason ErrExhausted and Last the
// *BreakerError). Schedule.Admit asks b too; its Decision.Reason is the
// refusal. b is shared by the loops given it; it
// must be safe for concurrent use. A nil b (or a nil pointer) is an
// *ArgumentError. A Retrier.Do whose first attempt succeeds costs what
// b.Allow and done cost on top (gobreaker's: one allocation, two clock
// reads, two short mutex sections).
func WithBreaker(b Breaker) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			c.bad("WithBreaker", "b", "must not be nil (omit the option for no breaker)")
			return
		}
		if nilness.Is(b) {
			c.bad("WithBreaker", "b", "is a nil pointer: pass a breaker, for example gobreaker.NewTwoStepCircuitBreaker")
			return
		}
		c.breaker = b
	})
}
