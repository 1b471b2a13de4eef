package rebound

import (
	"errors"
	"github.com/rebound-go/rebound/internal/nilness"
)

// A Breaker is a circuit breaker a loop asks before every attempt.
// Allow admits the attempt and returns done, which gets the attempt's error; or it refuses.
// gobreaker v2's *TwoStepCircuitBreaker[T] is a Breaker as it is:
//
//	cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
//		IsSuccessful: func(err error) bool { return !rebound.IsTransient(err) }, // a business error is not an outage
//		IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) },
//	})
//	r, err := rebound.NewRetrier(p, rebound.WithBreaker(cb))
//
// An admitted attempt that will not be made reports context.Canceled.
// Exclude it (IsExcluded above), or the breaker counts an unsent attempt.
type Breaker interface {
	Allow() (done func(err error), err error)
}

// ErrBreakerOpen is matched by the error of an attempt the Breaker refused.
// That error matches the breaker's own error too; the attempt was not sent.
var ErrBreakerOpen = errors.New("rebound: circuit breaker open: the attempt was not sent")

// breakerError is the error of an attempt the Breaker refused.
type breakerError struct{ Err error }

func (e *breakerError) Error() string { return ErrBreakerOpen.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrBreakerOpen and the breaker's error.
func (e *breakerError) Unwrap() []error { return []error{ErrBreakerOpen, e.Err} }

// WithBreaker makes every attempt of the loop ask b first.
// A refused attempt is handled like one the throttle rejects (see WithThrottle).
// b must be safe for concurrent use and not nil (docs/policy.md).
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
