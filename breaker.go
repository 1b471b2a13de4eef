package rebound

import (
	"errors"
)

// A Breaker is a circuit breaker a loop asks before every attempt.
// Allow admits the attempt and returns done, which gets its error; or it refuses.
// gobreaker v2's *TwoStepCircuitBreaker[T] is one (docs/breaker.md).
// An attempt admitted but not made reports context.Canceled: exclude it.
type Breaker interface {
	Allow() (done func(err error), err error)
}

// ErrBreakerOpen and the Breaker's error match a refused attempt's error.
var ErrBreakerOpen = errors.New("rebound: circuit breaker open: the attempt was not sent")

// breakerError is the error of an attempt the Breaker refused.
type breakerError struct{ Err error }

func (e *breakerError) Error() string { return ErrBreakerOpen.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrBreakerOpen and the breaker's error.
func (e *breakerError) Unwrap() []error { return []error{ErrBreakerOpen, e.Err} }
