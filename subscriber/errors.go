package subscriber

import (
	"errors"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrManagerClosed is Subscribe's error after Close, and the reason of
	// the subscriptions Close stopped. It matches rebound.ErrClosed.
	ErrManagerClosed = closed.New("subscriber: manager closed")
	// ErrUnsubscribed is the reason of a subscription stopped by
	// Unsubscribe.
	ErrUnsubscribed = errors.New("subscriber: unsubscribed")
	// ErrRegistryClosed is wrapped by an adapter whose client was closed.
	// It stops a subscription for good. It matches rebound.ErrClosed.
	ErrRegistryClosed = closed.New("subscriber: registry closed")
	// ErrDisconnected is a subscription's last error after the
	// ConnectionMonitor reported the connection lost, until the next
	// attempt.
	ErrDisconnected = errors.New("subscriber: registry connection lost")
)

// Reasons shown in Status.LastErr (docs/subscription.md).
var (
	// errNotConfirmed: a confirming adapter neither confirmed nor handed
	// back the subscription within WithConfirmTimeout of a reconnect.
	errNotConfirmed = errors.New("subscriber: no confirmation from the registry adapter after a reconnect")
	// errOutOfSync: a reconciliation read a list from the server that
	// differs from the one the adapter handed over.
	errOutOfSync = errors.New("subscriber: the registry's list differs from the delivered one")
)

func argError(fn, arg, reason string) error {
	return &rebound.ArgumentError{Func: fn, Arg: arg, Reason: reason}
}

// OpError is the error of a failed registry operation of an adapter.
// Match it with errors.As, and its cause with errors.Is.
type OpError struct {
	Registry string // the adapter: "nacos" or "etcd"
	Op       string // "subscribe", "unsubscribe", "get", "watch", "put"...
	Key      string // what the operation was about, in the adapter's words
	Err      error  // the cause
}

func (e *OpError) Error() string {
	return e.Registry + ": " + e.Op + " " + e.Key + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }
