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
	// ErrNotConfirmed is a subscription's last error when a
	// ReconnectConfirmer neither confirmed nor handed back the
	// subscription within WithConfirmTimeout of a reconnect: the Manager
	// confirms it itself.
	ErrNotConfirmed = errors.New("subscriber: no confirmation from the registry adapter after a reconnect")
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

// OpError reports a failed registry operation of an adapter. Every adapter
// (subscriber/nacos, subscriber/etcd) returns this one shape, wrapping the
// cause: match it with errors.As, and the cause with errors.Is (for example
// ErrDisconnected, ErrRegistryClosed or context.DeadlineExceeded).
type OpError struct {
	// Registry names the adapter: "nacos" or "etcd".
	Registry string
	// Op is the operation, for example "subscribe", "unsubscribe", "get",
	// "watch", "grant", "put".
	Op string
	// Key is what the operation was about, as the adapter names it (a
	// Key's String form, or an etcd key or prefix).
	Key string
	// Err is the cause.
	Err error
}

func (e *OpError) Error() string {
	return e.Registry + ": " + e.Op + " " + e.Key + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }
