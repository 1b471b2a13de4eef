package failback

import (
	"errors"
	"fmt"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

var (
	// ErrQueueFull is wrapped by the error Invoke returns when a call failed
	// with a retryable error but could not be queued because the task limit
	// (WithMaxTasks) was reached. The call will not be retried.
	ErrQueueFull = errors.New("failback: retry queue full")
	// ErrClosed is returned by Invoke once Shutdown or Close has begun (the
	// call is not attempted), and wrapped by the error Invoke returns when a
	// failed call could not be queued because Shutdown or Close had begun.
	// It matches rebound.ErrClosed.
	ErrClosed = rebound.NewClosedError("failback: invoker closed")
	// ErrExpired is wrapped by the error Invoke returns when a call's
	// time-to-live (WithTTL, WithCallTTL) would end before its first retry;
	// DropExpired is the matching drop reason.
	ErrExpired = errors.New("failback: call expired")
	// ErrNotRetryable is the Reason of a GiveUpError when a retry failed
	// with an error the classifier (WithRetryable) does not retry, or one
	// marked rebound.Permanent. Invoke's error matches it too when the
	// first attempt's error was not classified retryable (the call was not
	// queued); a rebound.Permanent error is returned as it is.
	ErrNotRetryable = errors.New("failback: error not retryable")
	// ErrPanicked is the Reason of a GiveUpError when a retry attempt (the
	// Directory's List, the LoadBalance's Select or the Invoker's Invoke)
	// or a hook reporting a non-final event (Queued, Retried) panicked; Last
	// is then a *PanicError with the panic value and stack.
	ErrPanicked = errors.New("failback: panicked")
	// ErrStopping marks an attempt that failed because the process, or the
	// transport the Invoker sends through, is shutting down (a gRPC
	// ClientConn being closed, an HTTP client whose transport was closed):
	// the provider never judged the call, so the failure is not the call's
	// own outcome. Mark such errors with Stopping. A retry that fails with a
	// Stopping error is not retried in this process and never given up: it
	// ends in Dropped with DropClosed and, with a Store, stays stored for the
	// next process, as Close leaves queued calls. The mark wins over the
	// classifier (WithRetryable) and over rebound.Permanent.
	ErrStopping = errors.New("failback: transport stopping")
)

// notRetriedError is Invoke's error for a first attempt whose error was
// not classified retryable: the error, with why it was not retried.
type notRetriedError struct{ err error }

func (e *notRetriedError) Error() string {
	return e.err.Error() + " (failback: not retried: the error is not classified retryable; the default" +
		" retries only rebound.Transient and network errors: mark it rebound.Transient or classify it with failback.WithRetryable)"
}
func (e *notRetriedError) Unwrap() []error { return []error{e.err, ErrNotRetryable} }

// notRetried returns err with why it was not retried; a Permanent error is
// the caller's own decision and is returned as it is, as is an error that
// says why already (from a failback Invoker behind this one).
func notRetried(err error) error {
	if _, said := errors.AsType[*notRetriedError](err); said || rebound.IsPermanent(err) {
		return err
	}
	return &notRetriedError{err: err}
}

// stoppingError is what Stopping returns.
type stoppingError struct{ err error }

func (e *stoppingError) Error() string   { return e.err.Error() }
func (e *stoppingError) Unwrap() []error { return []error{ErrStopping, e.err} }

// Stopping marks err as the failure of an attempt that could not be made
// because the process or its transport is shutting down (see ErrStopping).
// errors.Is(result, ErrStopping) holds, and errors.Is and errors.As still
// see err (its gRPC status, for example). It returns nil for a nil err.
//
// An Invoker over a transport that can be closed under the failback
// Invoker should mark the errors that say so: the calls then stay queued
// (in the Store) for the next process instead of becoming give-ups.
func Stopping(err error) error {
	if err == nil {
		return nil
	}
	return &stoppingError{err: err}
}

// IsStopping reports whether err, or an error it wraps, matches
// ErrStopping.
func IsStopping(err error) bool { return err != nil && errors.Is(err, ErrStopping) }

// PanicError is the error a recovered panic becomes (see cluster.PanicError):
// the Last of a GiveUpError whose Reason is ErrPanicked.
type PanicError = cluster.PanicError

// DropReason says why a call that failed with a retryable error will not
// be retried (any further) although its own outcome did not decide it.
// Each reason is a label safe for metrics.
type DropReason string

const (
	// DropQueueFull: the first attempt failed but the task limit was
	// reached; the call was never queued and Invoke returned an error
	// wrapping ErrQueueFull.
	DropQueueFull DropReason = "queue_full"
	// DropClosed: Close (or Shutdown's deadline) stopped the invoker while
	// the task was queued or while its attempt ran (the attempt's context
	// was cancelled), or Shutdown or Close had begun before a failed call
	// could be queued (then Invoke returned an error wrapping ErrClosed),
	// or a retry failed with an error marked Stopping (ErrStopping: the
	// transport is shutting down). With a Store, a call dropped for
	// any of these, once queued, stays stored for the next Invoker.
	DropClosed DropReason = "closed"
	// DropExpired: the call's time-to-live (WithTTL, WithCallTTL) ended, or
	// would end, before its next attempt could start. If that was already
	// so for the first retry, the call was never queued and Invoke returned
	// an error wrapping ErrExpired.
	DropExpired DropReason = "expired"
	// DropStore: the Store (WithStore) failed to add the call; it was never
	// queued and Invoke returned an error wrapping ErrStore.
	DropStore DropReason = "store"
	// DropBudget: the retry budget (WithBudget) refused the call's retry
	// when it was due: too many retries for the requests sent recently.
	DropBudget DropReason = "budget"
	// DropThrottled is no longer reported: a retry the adaptive throttle
	// (WithThrottle) rejects locally is rescheduled like a failed attempt,
	// and a call whose policy runs out that way ends in GaveUp (Last
	// rebound.ErrThrottled). Stats.Dropped keeps the key (always 0).
	//
	// Deprecated: see Stats.Throttled and WithThrottle.
	DropThrottled DropReason = "throttled"
)

// dropReasons lists every DropReason, in the order Stats reports them.
var dropReasons = [...]DropReason{DropQueueFull, DropClosed, DropExpired, DropStore, DropBudget, DropThrottled}

func (r DropReason) sentinel() error {
	switch r {
	case DropQueueFull:
		return ErrQueueFull
	case DropExpired:
		return ErrExpired
	case DropStore:
		return ErrStore
	case DropBudget:
		return rebound.ErrBudgetExhausted
	case DropThrottled:
		return rebound.ErrThrottled
	}
	return ErrClosed
}

// RejectedError is returned by Invoke when the first attempt failed with a
// retryable error and the call could not be queued for retry. errors.Is
// holds for ErrQueueFull, ErrClosed, ErrExpired or ErrStore (by Reason)
// and for the attempt's own error, Err.
type RejectedError struct {
	Reason DropReason
	Err    error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("failback: call not queued for retry (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the Reason's sentinel and the attempt's error.
func (e *RejectedError) Unwrap() []error { return []error{e.Reason.sentinel(), e.Err} }

// GiveUpError is the Err a Hooks.GaveUp receives: why the task stopped and
// the last attempt's error. errors.Is holds for Reason and for Last.
// Reason is one of:
//
//   - rebound.ErrExhausted (with detail): the Policy's MaxAttempts or
//     MaxElapsed ended the task, or a Retry-After would end past
//     MaxElapsed;
//   - ErrNotRetryable: the last error is not retryable;
//   - ErrPanicked: Last is a *PanicError.
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
