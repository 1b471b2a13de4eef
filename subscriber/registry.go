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
// is waiting has its wait cut short. On Disconnected it marks every
// subscription as retrying, keeps the last delivered lists (see
// WithEmptyListHold) and starts confirming the subscribed ones with backoff
// (loops already retrying keep their backoff).
type ConnectionMonitor interface {
	// MonitorConnection reports connection changes to report until ctx is
	// done, then returns (nil or ctx.Err()); report must be called from the
	// goroutine running MonitorConnection, never concurrently. The Manager
	// runs it in a goroutine it owns, from New to Close. Report
	// transitions only; reporting Connected more often than needed is
	// harmless but costs every subscription a confirmation.
	MonitorConnection(ctx context.Context, report func(ConnState)) error
}
