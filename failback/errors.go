package failback

import (
	"errors"
	"fmt"
)

var (
	// ErrQueueFull is wrapped by the error Invoke returns when a call failed
	// with a retryable error but could not be queued because the task limit
	// (WithMaxTasks) was reached. The call will not be retried.
	ErrQueueFull = errors.New("failback: retry queue full")
	// ErrClosed is returned by Invoke after Close (the call is not
	// attempted), and wrapped by the error Invoke returns when a failed call
	// could not be queued because Close had begun.
	ErrClosed = errors.New("failback: invoker closed")
	// ErrInvalidArgument is wrapped by the errors New, Invoke and Close
	// return for a bad argument or option; the message names it and the
	// rule it breaks.
	ErrInvalidArgument = errors.New("failback: invalid argument")
	// ErrRetriesExhausted is the Reason of a GiveUpError when the task made
	// all the retries WithRetries allows.
	ErrRetriesExhausted = errors.New("failback: retries exhausted")
	// ErrNotRetryable is the Reason of a GiveUpError when a retry failed
	// with an error the classifier (WithRetryable) does not retry, or one
	// marked rebound.Permanent.
	ErrNotRetryable = errors.New("failback: error not retryable")
)

// DropReason says why a call that failed with a retryable error will not
// be retried (any further).
type DropReason string

const (
	// DropQueueFull: the first attempt failed but the task limit was
	// reached; the call was never queued and Invoke returned an error
	// wrapping ErrQueueFull.
	DropQueueFull DropReason = "queue_full"
	// DropClosed: the invoker was closed while the task was queued or
	// running, or before a failed call could be queued (then Invoke
	// returned an error wrapping ErrClosed).
	DropClosed DropReason = "closed"
)

func (r DropReason) sentinel() error {
	if r == DropQueueFull {
		return ErrQueueFull
	}
	return ErrClosed
}

// RejectedError is returned by Invoke when the first attempt failed with a
// retryable error and the call could not be queued for retry. errors.Is
// holds for ErrQueueFull or ErrClosed (by Reason) and for the attempt's own
// error, Err.
type RejectedError struct {
	Reason DropReason
	Err    error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("failback: call not queued for retry (%s): %v", e.Reason, e.Err)
}

// Unwrap returns ErrQueueFull or ErrClosed, and the attempt's error.
func (e *RejectedError) Unwrap() []error { return []error{e.Reason.sentinel(), e.Err} }

// GiveUpError is the Err a Hooks.GaveUp receives: why the task stopped and
// the last attempt's error. errors.Is holds for Reason (ErrRetriesExhausted,
// ErrNotRetryable or rebound.ErrExhausted, the latter when the Policy's
// MaxAttempts or MaxElapsed ended the task, possibly with detail) and for
// Last.
type GiveUpError struct {
	// Attempts counts every attempt, the first (in Invoke) included.
	Attempts int
	Reason   error
	Last     error
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("failback: gave up after %d attempts: %v: %v", e.Attempts, e.Reason, e.Last)
}

// Unwrap returns Reason and Last.
func (e *GiveUpError) Unwrap() []error { return []error{e.Reason, e.Last} }
