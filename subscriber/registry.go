package subscriber

import (
	"context"
)

// Registry is what an adapter implements: one attempt per call; the
// Manager owns retries and timing. Calls for one Sink never overlap. An
// error matching rebound.ErrClosed (a closed client), or rebound.Permanent,
// stops a subscription; any other is retried. In full: docs/subscription.md.
type Registry interface {
	// Subscribe makes one attempt to subscribe sink to key, or to confirm
	// it. It returns nil once acknowledged; the adapter then calls
	// sink.Update with the full list, and after every change. Calling it
	// again for one sink replaces its delivery, never adds one.
	Subscribe(ctx context.Context, key Key, sink Sink) error
	// Unsubscribe stops delivery to sink. It is called once, after the
	// last Subscribe returned; the adapter must not call sink afterwards.
	Unsubscribe(ctx context.Context, key Key, sink Sink) error
}

// Sink is the Manager's side of one subscription, handed to the adapter.
// One Sink per subscription, the same in every call: a valid map key. Its
// methods are safe for concurrent use and never block.
type Sink interface {
	// Update reports the full current list, in the registry's order. The
	// Manager owns the slice afterwards.
	Update(instances []Instance)
	// Resubscribe reports that the adapter lost the subscription: the
	// Manager calls Subscribe again through its paced loop. err says why.
	Resubscribe(err error)
	// Confirmed reports evidence that the registry holds the subscription
	// now ("push", "watch progress"). It cancels a pending confirmation.
	Confirmed(reason string)
}

// ConnectionMonitor is an optional Registry that reports its connection.
// On a connect the Manager confirms every subscription again, unless the
// client does; while disconnected, retries wait for the connect. In full:
// docs/subscription.md.
type ConnectionMonitor interface {
	// MonitorConnection calls report at each change until ctx is done:
	// true for a (re)connect or a registry restart, false for a loss.
	// It returns an error matching rebound.ErrClosed once the client is
	// closed. report is called from this goroutine only.
	MonitorConnection(ctx context.Context, report func(connected bool)) error
	// ConfirmsReconnects reports whether the client resubscribes on its
	// own after a reconnect. If true, the Manager waits for Sink.Confirmed
	// or Sink.Resubscribe instead of sending, up to WithConfirmTimeout.
	// New calls it once.
	ConfirmsReconnects() bool
}

// Reconciler is an optional Registry that reads a key's list from the
// server in one request, bypassing every cache. The Manager uses it for
// WithReconcile and View.Refresh.
type Reconciler interface {
	// Lookup makes one read and returns the list; the Manager owns it.
	// A list that differs from the delivered one is delivered and
	// resubscribed.
	Lookup(ctx context.Context, key Key) ([]Instance, error)
}
