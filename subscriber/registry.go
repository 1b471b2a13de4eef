package subscriber

import (
	"context"
	"strconv"
)

// Registry is the contract between the Manager and a service registry
// adapter (subscriber/nacos adapts nacos-sdk-go; an etcd adapter would do a
// Get and a Watch from the revision after it). The Manager owns the retry
// timing: an adapter makes one attempt per call and reports what it sees;
// it never retries or sleeps on its own.
//
// The Manager calls Subscribe and Unsubscribe for one subscription from one
// goroutine at a time (never concurrently for the same Sink); calls for
// different subscriptions, including several subscriptions of the same Key,
// may run concurrently. A Registry must be safe for that.
//
// Errors: an error wrapping ErrRegistryClosed, or one marked with
// rebound.Permanent, stops the subscription for good (use them for "the
// registry client was closed" and for keys the registry can never accept).
// Every other error (unreachable, timeouts, server errors, "not connected")
// is transient: the Manager tries again, with jittered backoff, forever.
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

// ConnectionMonitor is implemented by a Registry that can tell when its
// connection to the registry is lost and re-established. It is optional:
// New uses it when the Registry implements it.
//
// On Connected, the Manager confirms every subscription again (calls
// Subscribe for each, paced by the shared limiter), because a client's own
// re-subscription after a reconnect can fail silently; a retry loop that
// is waiting has its wait cut short. An adapter that can tell from
// evidence whether the client's own re-subscription worked implements
// ReconnectConfirmer instead, and the Manager then sends nothing for the
// subscriptions the adapter confirms. On Disconnected it marks every
// subscription as retrying and keeps the last delivered lists (see
// WithEmptyListHold); until Connected, if the connection was up before,
// no retry is sent (a subscription's very first attempt excepted): they
// wait for that one report instead of timers of their own. Report Disconnected only when a Subscribe would
// fail; if MonitorConnection returns while the connection is down, the
// subscriptions retry on their own timers again.
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

// ReconnectConfirmer is implemented by a Registry whose client
// re-subscribes on its own after a reconnect (as nacos-sdk-go's redo does)
// and whose adapter can tell, from evidence, whether that worked. It is
// optional and only matters together with ConnectionMonitor. New calls
// ConfirmsReconnects once; when it returns true the Manager follows this
// contract, otherwise (or when the Registry does not implement it) it
// confirms every subscription itself after a reconnect (calls Subscribe
// for each, paced by the shared limiter).
//
// With ConfirmsReconnects true:
//
//   - On Disconnected, a subscription that was subscribed is marked
//     retrying (LastErr ErrDisconnected, the listener keeps its list) but
//     the Manager calls nothing: the connection is down, the client's own
//     redo will run when it is back.
//   - On Connected, the Manager does not call Subscribe for those
//     subscriptions. It waits, for each, for the adapter to call either
//     Sink.Confirmed (evidence that the registry holds it: the
//     subscription is subscribed again) or Sink.Resubscribe (no evidence
//     within the adapter's own bounded window, or the redo was rejected
//     or lost: the Manager confirms that subscription alone through its
//     jittered, limiter-paced loop). The adapter must answer for every
//     Sink it holds, within a bounded time that it documents.
//   - Safety cap: if the adapter says nothing for a subscription within
//     WithConfirmTimeout (default defaultConfirmTimeout) of the Connected
//     report, the Manager treats it as Resubscribe(ErrNotConfirmed).
//     Status.ConfirmDeadline shows the pending deadline.
//   - Subscriptions that were still pending or retrying (their Subscribe
//     calls failing) are not the adapter's to confirm: their loop
//     continues, its backoff wait cut short by the Connected report as
//     without a ReconnectConfirmer.
//   - A second Disconnected/Connected before the answer restarts the wait
//     (and the cap) for the subscriptions still waiting.
//   - Report Connected (through MonitorConnection) before calling
//     Confirmed or Resubscribe for that reconnect: a Confirmed that arrives
//     while the Manager has not yet seen the Connected report is recorded
//     (Status.ConfirmedAt) but cannot end a wait that has not begun.
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
