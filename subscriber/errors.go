package subscriber

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidArgument is wrapped by every *ArgumentError.
	ErrInvalidArgument = errors.New("subscriber: invalid argument")
	// ErrManagerClosed is returned by Subscribe after Close, and is the
	// reason (Subscription.Err) of every subscription that Close stopped.
	ErrManagerClosed = errors.New("subscriber: manager closed")
	// ErrUnsubscribed is the reason of a subscription stopped by
	// Unsubscribe.
	ErrUnsubscribed = errors.New("subscriber: unsubscribed")
	// ErrRegistryClosed is returned (wrapped) by an adapter whose registry
	// client was closed. It stops a subscription for good.
	ErrRegistryClosed = errors.New("subscriber: registry closed")
	// ErrDisconnected is a subscription's last error after the
	// ConnectionMonitor reported the connection lost, until the next
	// attempt.
	ErrDisconnected = errors.New("subscriber: registry connection lost")
)

// ArgumentError reports a bad argument or option. It wraps
// ErrInvalidArgument.
type ArgumentError struct {
	// Func is the function or option that rejected the argument.
	Func string
	// Arg names the argument (for example "key.Service").
	Arg string
	// Reason says what is wrong with it.
	Reason string
	// Err is an underlying error, if any (for example the policy's
	// validation error).
	Err error
}

func (e *ArgumentError) Error() string {
	s := fmt.Sprintf("subscriber: %s: %s %s", e.Func, e.Arg, e.Reason)
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

func argError(fn, arg, reason string) error {
	return &ArgumentError{Func: fn, Arg: arg, Reason: reason}
}
