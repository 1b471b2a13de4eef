package rebound

import (
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

var (
	// ErrInvalidPolicy is wrapped by every error Policy.Validate returns.
	ErrInvalidPolicy = errors.New("rebound: invalid policy")
	// ErrExhausted is wrapped by the error Retry returns when the policy
	// allows no further attempt (MaxAttempts, MaxElapsed, or a Retry-After
	// that does not fit in MaxElapsed).
	ErrExhausted = errors.New("rebound: retries exhausted")
	// ErrInvalidArgument is matched by every *ArgumentError: a bad
	// argument or option value, in any package of rebound.
	ErrInvalidArgument = errors.New("rebound: invalid argument")
	// ErrCalledFromCallback is returned by a Close or Shutdown called from
	// one of the callbacks of the thing it stops (an observer, a listener,
	// a hook), which it would otherwise wait for: the stop has begun and
	// finishes in the background once the callback returns (a later Close
	// or Shutdown from outside waits for that end). A subscriber Manager,
	// a failback Invoker and a Queue return it. It matches no other error.
	ErrCalledFromCallback = errors.New("rebound: Close or Shutdown called from a callback: stopping in the background")
)

// RetryError is returned by Retry (and Retrier.Do, Schedule.Admit and
// Attempt.Done) when a loop stops retrying an error that was still
// considered transient: the policy was exhausted, the context was done, or
// the next wait would have ended after the context's deadline. A loop whose
// context was done before its first attempt returns one with Attempts 0 and
// a nil Last.
//
// errors.Is(err, Reason) and errors.Is(err, Last) both hold, so a caller can
// test for ErrExhausted, context.Canceled or context.DeadlineExceeded and for
// the operation's own error.
type RetryError struct {
	// Attempts is how many times the operation was called.
	Attempts int
	// Last is the error of the last attempt.
	Last error
	// Reason says why retrying stopped: ErrExhausted, context.Canceled or
	// context.DeadlineExceeded (possibly wrapped with detail).
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

// Unwrap returns the reason and the last error (if any).
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

// Permanent marks err as not worth retrying: Retry returns it (unwrapped) at
// once. It returns nil for a nil err. The result is a *backoff.PermanentError,
// so it is understood by cenkalti/backoff's own loops too, and
// errors.Is/errors.As see through it to err.
func Permanent(err error) error {
	return backoff.Permanent(err)
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent (or backoff.Permanent).
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*backoff.PermanentError](err)
	return ok
}

// RetryAfterError carries a server's explicit instruction to wait at least
// Delay before the next attempt. Create it with RetryAfter.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.Delay)
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err with a server's instruction to wait at least d before
// the next attempt: the next wait is max(min(d, Policy.MaxRetryAfter), the
// policy's delay), so a huge d (a parsed "Retry-After: 4294967295") waits
// at most MaxRetryAfter (default 5 min) instead of pinning the loop. It
// returns nil for a nil err; a negative d counts as 0.
//
// If waiting d would end after the context's deadline, Retry returns at once
// (an error wrapping context.DeadlineExceeded) instead of sleeping through
// it. If it would end after the policy's MaxElapsed budget, Retry returns at
// once with an error wrapping ErrExhausted whose text names the Retry-After:
// the instruction is neither ignored nor allowed to stop retrying silently.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}

// RetryAfterDelay returns the Retry-After delay carried by err (or any error
// it wraps), if any.
func RetryAfterDelay(err error) (time.Duration, bool) {
	if ra, ok := errors.AsType[*RetryAfterError](err); ok {
		return ra.Delay, true
	}
	return 0, false
}

// asPermanent returns the *backoff.PermanentError in err's chain, if any.
func asPermanent(err error) *backoff.PermanentError {
	p, _ := errors.AsType[*backoff.PermanentError](err)
	return p
}
