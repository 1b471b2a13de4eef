package subscriber

import (
	"errors"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrManagerClosed is returned by Subscribe after Close, and is the
	// reason (Subscription.Err) of every subscription that Close stopped.
	// It matches rebound.ErrClosed.
	ErrManagerClosed = closed.New("subscriber: manager closed")
	// ErrUnsubscribed is the reason of a subscription stopped by
	// Unsubscribe.
	ErrUnsubscribed = errors.New("subscriber: unsubscribed")
	// ErrRegistryClosed is returned (wrapped) by an adapter whose registry
	// client was closed. It stops a subscription for good. It matches
	// rebound.ErrClosed.
	ErrRegistryClosed = closed.New("subscriber: registry closed")
	// ErrRegistrationStopped is returned (wrapped) by Registration.Update
	// after Shutdown or Close, or after the registration stopped for good
	// on a permanent error. It matches rebound.ErrClosed.
	ErrRegistrationStopped = closed.New("subscriber: registration stopped")
	// ErrDisconnected is a subscription's last error after the
	// ConnectionMonitor reported the connection lost, until the next
	// attempt.
	ErrDisconnected = errors.New("subscriber: registry connection lost")
	// ErrNotConfirmed is a subscription's last error when a
	// ReconnectConfirmer neither confirmed nor handed back the
	// subscription within WithConfirmTimeout of a reconnect: the Manager
	// confirms it itself.
	ErrNotConfirmed = errors.New("subscriber: no confirmation from the registry adapter after a reconnect")
	// ErrOutOfSync is a subscription's last error when a reconciliation
	// (WithReconcile, Refresh) read a list from the server that differs
	// from the one the adapter handed over: the Manager delivered the
	// server's list and resubscribes.
	ErrOutOfSync = errors.New("subscriber: the registry's list differs from the delivered one")
)

func argError(fn, arg, reason string) error {
	return &rebound.ArgumentError{Func: fn, Arg: arg, Reason: reason}
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
