package rebound

import (
	"errors"
	"fmt"
)

// The error families every package of rebound shares. A package's own
// sentinels (subscriber.ErrManagerClosed, failback.ErrClosed, ...) keep
// their own text but match these with errors.Is, so that a caller can ask
// "was it closed?" or "was it my argument?" without knowing which package
// answered.
var (
	// ErrClosed is matched by every "closed" error of rebound's packages:
	// a call on something that was closed or shut down.
	ErrClosed = errors.New("rebound: closed")
)

// familyError is a sentinel with its own text that matches a family
// sentinel (ErrClosed, ErrInvalidArgument) with errors.Is. Wrapping with
// fmt.Errorf("...: %w", ErrClosed) would repeat the family's text in every
// message; this keeps one prefix per message.
type familyError struct {
	msg    string
	family error
}

func (e *familyError) Error() string        { return e.msg }
func (e *familyError) Is(target error) bool { return target == e.family }

// NewClosedError returns a new sentinel error with text msg that matches
// ErrClosed with errors.Is. Packages use it for their own "closed"
// sentinels. Each call returns a distinct error.
func NewClosedError(msg string) error { return &familyError{msg: msg, family: ErrClosed} }

// ArgumentError reports a bad argument or option value. It matches
// ErrInvalidArgument (and Err, if set) with errors.Is. Every constructor and
// function in rebound's packages reports bad input with one.
type ArgumentError struct {
	// Func is the function or option that rejected the value, qualified by
	// its package (for example "subscriber.New" or "failback.WithWorkers").
	Func string
	// Arg names the argument or field (for example "key.Service").
	Arg string
	// Reason states the rule that was broken (for example "must be > 0").
	Reason string
	// Err is an underlying error, if any (for example a policy's
	// validation error).
	Err error
}

func (e *ArgumentError) Error() string {
	s := fmt.Sprintf("%s: %s %s", e.Func, e.Arg, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalidArgument and Err.
func (e *ArgumentError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidArgument}
	}
	return []error{ErrInvalidArgument, e.Err}
}

// TransientError marks an error as transient: a later attempt may succeed
// (for example "provider overloaded", "leader not elected yet"). Create it
// with Transient.
type TransientError struct {
	Err error
}

func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the marked error, so errors.Is and errors.As see through
// the mark.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient marks err as worth retrying; it is the counterpart of
// Permanent. It returns nil for a nil err. Classifiers in rebound's
// packages (failback's default among them) retry errors marked Transient;
// a Permanent mark anywhere in the chain still wins.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// IsTransient reports whether err, or any error it wraps, was marked with
// Transient.
func IsTransient(err error) bool {
	_, ok := errors.AsType[*TransientError](err)
	return ok
}
