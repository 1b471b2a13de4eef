package subscriber

import (
	"errors"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

// The reasons of a stop the caller asked for (Close, Unsubscribe); both
// match rebound.ErrClosed.
var (
	// errManagerClosed is Subscribe's error after Close, and the reason of
	// the subscriptions Close stopped.
	errManagerClosed = closed.New("subscriber: manager closed")
	// errUnsubscribed is the reason of a subscription stopped by
	// Unsubscribe.
	errUnsubscribed = closed.New("subscriber: unsubscribed")
)

// Reasons shown in Status.LastErr (docs/subscription.md).
var (
	// errDisconnected: the ConnectionMonitor reported the connection
	// lost (until the next attempt; Snapshot.Unresolved too).
	errDisconnected = errors.New("subscriber: registry connection lost")
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
