package subscriber

import (
	"context"
	"strconv"
)

// Registry is the contract between the Manager and a registry adapter
// (subscriber/nacos, subscriber/etcd). An adapter makes one attempt per
// call and reports what it sees; the Manager owns retries and timing.
// Calls for one Sink never overlap; calls for different Sinks may. An
// error wrapping ErrRegistryClosed, or marked rebound.Permanent, stops a
// subscription for good; any other is retried.
type Registry interface {
	// Subscribe makes one attempt to subscribe sink to key's instance list,
	// or to confirm that an existing subscription of sink is still in place
	// on the registry (the Manager calls it again for the same sink after
	// every failure, after sink.Resubscribe and after the connection
	// monitor reports a reconnect).
	//
	// It returns nil once the registry has acknowledged the subscription.
	// The adapter then calls sink.Update with the current full list: before
	// Subscribe returns (as nacos-sdk-go does) or soon after, and again
	// after every change. Subscribe must be idempotent per sink: calling it
	// again for the same sink must replace, never add, the adapter's
	// delivery to it, so that no change reaches the sink twice because of a
	// retry.
	//
	// ctx is cancelled when the Manager no longer wants the attempt (the
	// subscription stops or a reconnect restarts its loop); an adapter
	// should return promptly then.
	Subscribe(ctx context.Context, key Key, sink Sink) error

	// Unsubscribe stops delivery to sink and releases what the adapter
	// holds for it. The Manager calls it once when a subscription stops,
	// after its last Subscribe call has returned, if Subscribe was called
	// at all. After it returns the adapter must not call sink again (calls
	// that race with it are ignored by the Manager).
	Unsubscribe(ctx context.Context, key Key, sink Sink) error
}

// Sink is the Manager's side of one subscription, handed to the adapter.
// The same Sink value is passed to every Subscribe and Unsubscribe call of
// one subscription, and different subscriptions have different Sinks, so
// an adapter may use it as a map key. Its methods are safe for concurrent
// use, never block, and never call back into the Registry.
type Sink interface {
	// Update reports the full current instance list. The Manager takes
	// ownership of the slice (it may sort it): the adapter must not use it
	// afterwards. Updates must be reported in the order the registry
	// produced them; the Manager keeps that order, drops a list equal to the
	// one last delivered and may coalesce bursts.
	Update(instances []Instance)
	// Resubscribe reports that the adapter lost this subscription (a watch
	// failed, a revision was compacted, the server forgot it): the Manager
	// calls Subscribe again, through its retry loop and shared limiter.
	// err says why; it is shown in the subscription's Status.
	Resubscribe(err error)
	// Confirmed reports evidence that the registry holds this
	// subscription right now: for example a push or a cache refresh for
	// its key that is newer than the last reconnect, or a successful
	// read of the key made for this purpose. reason names the evidence in
	// a few words ("push", "cache refresh", "watch progress"); it is
	// shown in Status.ConfirmReason and passed to Hooks.OnConfirmed.
	//
	// The Manager records it (Status.ConfirmedAt) and cancels any
	// confirmation of the subscription that is pending but not yet sent
	// (one waiting for a ReconnectConfirmer's evidence, a Refresh, a
	// reconciliation), so the registry is not asked again. It does not end
	// a retry loop whose Registry.Subscribe calls are failing: only an
	// acknowledged Subscribe does. An adapter may call Confirmed at any
	// time, as often as it likes; a call after Unsubscribe is ignored.
	Confirmed(reason string)
}

// ConnState is a registry connection state reported by a
// ConnectionMonitor.
type ConnState int

const (
	// Disconnected: the adapter lost its connection to the registry.
	Disconnected ConnState = iota + 1
	// Connected: the adapter (re)connected to the registry, or learnt that
	// the registry restarted. Every subscription is confirmed again.
	Connected
)

func (s ConnState) String() string {
	switch s {
	case Disconnected:
		return "disconnected"
	case Connected:
		return "connected"
	}
	return "ConnState(" + strconv.Itoa(int(s)) + ")"
}

// ConnectionMonitor is an optional Registry that reports when its
// connection is lost and re-established. On Connected the Manager confirms
// every subscription again, unless a ReconnectConfirmer does. On
// Disconnected subscriptions keep their lists and wait for Connected
// instead of their timers; report it only when a Subscribe would fail.
// The contract in full: docs/subscription.md.
type ConnectionMonitor interface {
	// MonitorConnection reports connection changes to report until ctx is
	// done, then returns (nil or ctx.Err()). It returns an error matching
	// ErrRegistryClosed when the registry client was closed: the Manager
	// then stops with that error (Subscription.Err) every subscription
	// that has no attempt to come (subscribed, or waiting for the
	// connection); the others stop when their next Subscribe returns it.
	// report must be called from the
	// goroutine running MonitorConnection, never concurrently. The Manager
	// runs it in a goroutine it owns, from New to Close. Report
	// transitions only; reporting Connected more often than needed is
	// harmless but costs every subscription a confirmation.
	MonitorConnection(ctx context.Context, report func(ConnState)) error
}

// ReconnectConfirmer is an optional ConnectionMonitor whose client
// re-subscribes on its own after a reconnect (nacos-sdk-go's redo) and
// whose adapter can tell from evidence whether that worked. With
// ConfirmsReconnects true, the Manager sends nothing on Connected for the
// subscriptions that were subscribed: it waits, up to WithConfirmTimeout,
// for Sink.Confirmed or Sink.Resubscribe. The contract in full:
// docs/subscription.md.
type ReconnectConfirmer interface {
	// ConfirmsReconnects reports whether the adapter confirms every
	// subscription after a reconnect (see the type's contract). New calls
	// it once.
	ConfirmsReconnects() bool
}

// Reconciler is implemented by a Registry that can read a key's current
// instance list from the server in one request, bypassing every cache.
// It is optional; the Manager uses it for periodic reconciliation
// (WithReconcile) and for Subscription.Refresh.
type Reconciler interface {
	// Lookup makes one read of key's full instance list from the server
	// (never from a client cache) and returns it; the Manager takes
	// ownership of the slice. It makes one attempt and never retries; its
	// errors are classified like Subscribe's (a failed Lookup is not
	// retried by itself: the next period or Refresh tries again). ctx
	// bounds the call.
	//
	// The Manager compares the result with the last list it received
	// from the adapter for that subscription: if they differ (and no newer
	// Update arrived meanwhile) it delivers the Lookup's list to the
	// listener and resubscribes the subscription through its paced loop,
	// because a subscription whose pushes went missing cannot be trusted.
	Lookup(ctx context.Context, key Key) ([]Instance, error)
}
