// Package subscriber keeps a service's subscriptions to its service
// registry alive: subscribe until the registry acknowledges, confirm every
// subscription again after the registry restarts or the client reconnects,
// and deliver each change of the instance list to its listener exactly once,
// in order.
//
// # Model
//
// A Manager (New) runs subscriptions through a Registry adapter
// (subscriber/nacos for nacos-sdk-go/v2; subscribertest for tests). Data
// flows one way: registry push -> adapter -> Sink -> Manager -> Listener.
//
//   - Manager.Subscribe validates its arguments and returns at once. The
//     first Registry.Subscribe attempt starts at once; after a failure the
//     subscription retries with the policy's jittered backoff (a
//     rebound.Schedule per subscription from a rebound.Retrier compiled in
//     New: full jitter, 1 s doubling to 30 s by default, unlimited
//     attempts), each retry taking a token of a shared rate.Limiter
//     (WithLimiter, default 1,000/s, burst 100); Subscription.Ready is
//     closed at the first acknowledgement. While a ConnectionMonitor
//     reports the connection down, retries wait for its Connected report
//     instead of their own timers: a down registry costs nothing per
//     subscription. "Manager closed",
//     "unsubscribed", "ctx done", ErrRegistryClosed and rebound.Permanent
//     errors end a subscription; every other error is retried forever.
//     Optionally a shared rebound.RetryBudget (WithBudget) and
//     rebound.AdaptiveThrottle (WithThrottle) bound the retries: a retry
//     they refuse is deferred to the next backoff step, never a stop.
//   - One scheduler per Manager (one heap of due times, one timer, on a
//     grid so that close due times share a wake-up, a limiter token's
//     wait excepted, see timerSlack) holds
//     every wait of every subscription: the next attempt, a limiter token,
//     a confirmation cap, the end of an empty-list hold, a reconciliation.
//     Attempts run on the scheduler goroutine; one that blocks is left to
//     finish while a new scheduler goroutine takes over. A waiting
//     subscription costs about 1 KB and no goroutine.
//   - The adapter hands lists to the subscription's Sink; a delivery
//     goroutine (only while there is something to deliver) calls the
//     Listener, outside every lock, with the latest list. The same list is
//     never delivered twice in a row and lists are never reordered; a
//     burst may be coalesced into its latest list. A panicking or slow
//     listener only affects its own subscription.
//   - Confirmation: when the ConnectionMonitor reports a reconnect the
//     Manager confirms every subscription again (one Subscribe each,
//     through the limiter), unless the adapter is a ReconnectConfirmer:
//     then it waits for the adapter's evidence (Sink.Confirmed) or hand-back
//     (Sink.Resubscribe) per subscription, sending nothing for the ones
//     the client's own re-subscription restored (with a safety cap,
//     WithConfirmTimeout). Sink.Resubscribe, WithReconcile (periodic
//     Reconciler.Lookup, repair on difference) and Subscription.Refresh
//     (coalesced, paced; a gRPC resolver's ResolveNow) confirm single
//     subscriptions.
//   - Last-known-good: while a subscription is disrupted its listener keeps
//     the last list. An empty list that arrives after a real registry
//     disconnection or restart (not after an adapter's Resubscribe) is held
//     back until the subscription has been confirmed for WithEmptyListHold
//     (default 30 s), never longer than that after it arrived (a hard
//     cap), and is dropped if a non-empty list arrives first; Status shows
//     it (StateHeld, HeldSince, HeldUntil, HeldReason). The same holds for
//     an empty first list of a subscription created during an outage or
//     within WithEmptyListHold after a reconnect: it is not delivered
//     before the providers have had the hold to re-register. With a
//     Reconciler, up to three Lookups during the hold (at 1/8, 1/4 and 1/2
//     of it) ask the server: if it holds instances, they are delivered at
//     once and the subscription is resubscribed, so a lost re-registration
//     push does not end in an empty list at the cap.
//   - Manager.Status reports each subscription's state (pending,
//     subscribed, retrying, held, stopped), attempts, last error, since
//     when, confirmation and hold; stopped subscriptions stay listed with
//     their reason (the last 100).
//     Manager.Counts gives per-state counts without locking any
//     subscription; observers (WithObserver, with Hooks as the typed
//     adapter) receive state changes, deliveries, confirmations, deferrals
//     and reconnects as rebound.Events, never under a lock, in order per
//     subscription (see Hooks for what a slow one stalls).
//   - Close (or Shutdown, bounded by a context) is idempotent, stops every
//     subscription, unsubscribes from the registry and waits for every
//     goroutine of the Manager; from a listener or observer it starts
//     closing and returns rebound.ErrCalledFromCallback instead of
//     deadlocking.
//
// # Shared views
//
// Manager.Watch (and WatchGroup.Watch, for a component built over the
// Manager) returns a View of a key's list instead of taking a Listener:
// every View of one key shares one Manager subscription, reference-counted
// (the last Close ends it, after the group's WatchLinger). A View shows a
// Snapshot (the current list; the registry's error while there is no list
// yet, Snapshot.Unresolved; the reason of a stop for good,
// Snapshot.Stopped) and signals each change on a channel that coalesces:
// a slow reader finds the latest snapshot, never a backlog. The
// unresolved error and the stop are pushed as they happen (the outcome of
// each Registry.Subscribe attempt, a lost connection, the subscription's
// end), not polled; View.Refresh re-confirmations are paced per key by
// the group (WatchRefreshInterval). reboundgrpc's resolvers,
// reboundkratos' Discovery and cluster.WithView read their lists this
// way. See docs/watch.md.
//
// Logging goes through an injected *zap.Logger (WithLogger, default none)
// and package logging's throttled Loop: a subscription failing for an hour
// writes a handful of lines, each attempt at Debug.
//
// # Providers
//
// Registration is the provider's side: one instance kept registered until
// Shutdown (deregister, confirmed) or Close (stop repairing), with the
// states of RegistrationState and a RegistrationStatus; its events go to a
// rebound.Observer.
// nacos.Register and etcd.Register implement it, and both pass
// subscribertest.RunRegistration. Drain stops a provider in the order that
// fails no call: deregister, wait, stop serving.
//
// # Writing an adapter
//
// See Registry, Sink and ConnectionMonitor. An adapter makes one attempt per
// Subscribe call and never retries on its own; it keeps exactly one
// delivery per Sink however often Subscribe is called; it maps "client
// closed" to ErrRegistryClosed. The etcd adapter (subscriber/etcd), for
// example, Gets the prefix and Watches from the next revision in Subscribe
// (replacing any watch of the same Sink), calls Sink.Update with the full
// list after the Get and after every event, and calls Sink.Resubscribe when
// the watch fails or its revision is compacted.
package subscriber
