package rebound

import (
	"errors"
	"fmt"

	"github.com/rebound-go/rebound/internal/closed"
)

// ErrClosed is matched by every "closed" error of rebound's packages.
var ErrClosed = closed.Err

// ArgumentError reports a bad argument or option value.
// It matches ErrInvalidArgument, and Err if set.
type ArgumentError struct {
	// Func is the function or option that rejected the value, such as "failback.New".
	Func string
	// Arg names the argument or field.
	Arg string
	// Reason states the broken rule, such as "must be > 0".
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *ArgumentError) Error() string {
	s := fmt.Sprintf("%s: %s %s", e.Func, e.Arg, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ArgumentError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidArgument}
	}
	return []error{ErrInvalidArgument, e.Err}
}

// transientError is an error marked with Transient.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as worth retrying, the counterpart of Permanent.
// It returns nil for a nil err; a Permanent mark still wins.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// IsTransient reports whether err's chain holds a Transient mark.
func IsTransient(err error) bool {
	_, ok := errors.AsType[*transientError](err)
	return ok
}

// joinArgErrors joins several option errors; errors.As finds the first
// *ArgumentError.
func joinArgErrors(errs []error) error { return errors.Join(errs...) }
