package failback

import (
	"errors"
	"fmt"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrQueueFull: the call could not be queued because WithMaxTasks was
	// reached. It is not retried.
	ErrQueueFull = errors.New("failback: retry queue full")
	// ErrClosed is returned by Invoke once Shutdown or Close has begun. It
	// is also the reason of a call dropped by Close. It matches
	// rebound.ErrClosed.
	ErrClosed = closed.New("failback: invoker closed")
	// ErrExpired: the call's time-to-live (WithTTL) ended before its next
	// attempt could start.
	ErrExpired = errors.New("failback: call expired")
)

var (
	// errNotRetryable is the Reason of a give-up (EventGiveUp) for an
	// error the classifier does not retry, or a rebound.Permanent one.
	// Invoke's error wraps it when the first attempt's error was not
	// retryable.
	errNotRetryable = errors.New("failback: error not retryable")
	// errPanicked is the Reason of a give-up when a retry attempt or an
	// observer panicked. Last is then a *cluster.PanicError.
	errPanicked = errors.New("failback: panicked")
)

// notRetriedError is Invoke's error for a first attempt whose error was
// not classified retryable: the error, with why it was not retried.
type notRetriedError struct{ err error }

func (e *notRetriedError) Error() string {
	return e.err.Error() + " (failback: not retried: the error is not classified retryable; the default" +
		" retries only rebound.Transient and network errors: mark it rebound.Transient or classify it with failback.WithRetryable)"
}
func (e *notRetriedError) Unwrap() []error { return []error{e.err, errNotRetryable} }

// notRetried returns err with why it was not retried; a Permanent error is
// the caller's own decision and is returned as it is, as is an error that
// says why already (from a failback Invoker behind this one).
func notRetried(err error) error {
	if _, said := errors.AsType[*notRetriedError](err); said || rebound.IsPermanent(err) {
		return err
	}
	return &notRetriedError{err: err}
}

// errStopping marks an attempt that failed because the transport is
// shutting down (see Stopping).
var errStopping = errors.New("failback: transport stopping")

// stoppingError is what Stopping returns.
type stoppingError struct{ err error }

func (e *stoppingError) Error() string   { return e.err.Error() }
func (e *stoppingError) Unwrap() []error { return []error{errStopping, e.err} }

// Stopping marks err as the failure of an attempt whose transport is
// shutting down (a closing gRPC ClientConn). Such a call is not given up:
// it is dropped with ErrClosed and stays in the Store for the next process.
// The mark wins over the classifier and rebound.Permanent; nil stays nil.
func Stopping(err error) error {
	if err == nil {
		return nil
	}
	return &stoppingError{err: err}
}

// isStopping reports whether err is marked Stopping.
func isStopping(err error) bool { return err != nil && errors.Is(err, errStopping) }

// dropReason says why a call that failed with a retryable error will not
// be retried (any further) although its own outcome did not decide it. It
// is a label for logs; users see its sentinel (Task.Reason,
// the keys of Stats.Dropped, what Invoke's error matches).
type dropReason string

const (
	dropQueueFull dropReason = "queue_full" // ErrQueueFull
	dropClosed    dropReason = "closed"     // ErrClosed
	dropExpired   dropReason = "expired"    // ErrExpired
	dropStore     dropReason = "store"      // ErrStore
	dropBudget    dropReason = "budget"     // rebound.ErrBudgetExhausted
)

// dropReasons lists every dropReason, in the order Stats reports them.
var dropReasons = [...]dropReason{dropQueueFull, dropClosed, dropExpired, dropStore, dropBudget}

func (r dropReason) sentinel() error {
	switch r {
	case dropQueueFull:
		return ErrQueueFull
	case dropExpired:
		return ErrExpired
	case dropStore:
		return ErrStore
	case dropBudget:
		return rebound.ErrBudgetExhausted
	}
	return ErrClosed
}

// rejectedError is Invoke's error for a call that failed with a retryable
// error but could not be queued: errors.Is matches Reason (a drop
// sentinel) and Err (the attempt's error).
type rejectedError struct {
	Reason error
	Err    error
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("failback: call not queued for retry (%s): %v", dropLabel(e.Reason), e.Err)
}

func (e *rejectedError) Unwrap() []error { return []error{e.Reason, e.Err} }

// dropLabel is the log label of a drop sentinel.
func dropLabel(reason error) dropReason {
	for _, r := range dropReasons {
		if r.sentinel() == reason {
			return r
		}
	}
	return dropReason(fmt.Sprint(reason))
}
