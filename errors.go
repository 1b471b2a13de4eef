package rebound

import (
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

var (
	// ErrExhausted is the Reason of a *RetryError once the policy ends the loop.
	ErrExhausted = errors.New("rebound: retries exhausted")
	// ErrInvalidArgument is matched by every *ArgumentError, in every package.
	ErrInvalidArgument = errors.New("rebound: invalid argument")
	// ErrCalledFromCallback is returned by a Close or Shutdown called from a callback of what it stops.
	// The stop goes on once the callback returns.
	ErrCalledFromCallback = errors.New("rebound: Close or Shutdown called from a callback: stopping in the background")
)

// errInvalidPolicy is wrapped by every error of a Policy's check.
var errInvalidPolicy error = invalidPolicy{}

type invalidPolicy struct{}

func (invalidPolicy) Error() string        { return "rebound: invalid policy" }
func (invalidPolicy) Is(target error) bool { return target == ErrInvalidArgument }

// RetryError is returned when a loop stops retrying a transient error.
// It matches its Reason and its Last error with errors.Is.
// A loop whose context ended before any attempt returns Attempts 0 and a nil Last.
type RetryError struct {
	// Attempts is how many times the operation was called.
	Attempts int
	// Last is the error of the last attempt.
	Last error
	// Reason says why retrying stopped: ErrExhausted, ErrBudgetExhausted or the context's error.
	Reason error
}

func (e *RetryError) Error() string {
	if e.Last == nil {
		if e.Attempts == 0 {
			return fmt.Sprintf("rebound: not attempted: %v", e.Reason)
		}
		return fmt.Sprintf("rebound: gave up after %d attempt%s: %v",
			e.Attempts, plural(e.Attempts), e.Reason)
	}
	return fmt.Sprintf("rebound: gave up after %d attempt%s: %v: %v",
		e.Attempts, plural(e.Attempts), e.Reason, e.Last)
}

func (e *RetryError) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Last}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Permanent marks err as not worth retrying: a loop returns err at once.
// It returns nil for a nil err.
// cenkalti/backoff's loops honour the mark too.
func Permanent(err error) error {
	return backoff.Permanent(err)
}

// IsPermanent reports whether err's chain holds a Permanent mark.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*backoff.PermanentError](err)
	return ok
}

// retryAfterError carries a server's instruction to wait at least delay.
type retryAfterError struct {
	delay time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.err, e.delay)
}

func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err with a server's instruction to wait at least d.
// The next wait is at least min(d, Policy.MaxRetryAfter).
// It returns nil for a nil err; a negative d counts as 0 (docs/policy.md).
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{delay: max(d, 0), err: err}
}

// RetryAfterDelay returns the delay of a RetryAfter in err's chain, if any.
func RetryAfterDelay(err error) (time.Duration, bool) {
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return ra.delay, true
	}
	return 0, false
}

// asPermanent returns the *backoff.PermanentError in err's chain, if any.
func asPermanent(err error) *backoff.PermanentError {
	p, _ := errors.AsType[*backoff.PermanentError](err)
	return p
}
