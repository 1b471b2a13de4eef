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
//   - Manager.Subscribe validates its arguments and returns at once. A
//     background loop (rebound.Retry: full jitter, 1 s doubling to 30 s by
//     default, unlimited attempts) calls Registry.Subscribe until it
//     succeeds; Subscription.Ready is closed then. "Manager closed",
//     "unsubscribed", "ctx done", ErrRegistryClosed and rebound.Permanent
//     errors end a subscription; every other error (unreachable, timeouts,
//     server errors) is retried forever.
//   - The adapter hands lists to the subscription's Sink; one delivery
//     goroutine per subscription calls the Listener, outside every lock,
//     with the latest list. The same list is never delivered twice in a row
//     and lists are never reordered; a burst may be coalesced into its
//     latest list (lists are full snapshots). A panicking or slow listener
//     only affects its own subscription.
//   - Resubscribe: when the adapter's ConnectionMonitor reports a
//     reconnect, or the adapter calls Sink.Resubscribe, the subscription is
//     confirmed again by the same jittered loop. Every retry and every such
//     confirmation takes a token from a shared rate.Limiter (WithLimiter,
//     default 1,000/s, burst 100), so thousands of subscriptions do not hit a
//     recovering registry at once.
//   - Last-known-good: while a subscription is disrupted its listener keeps
//     the last list; an empty list that arrives then is held back until the
//     registry has been confirmed for WithEmptyListHold (default 30 s) and
//     is dropped if a non-empty list arrives first.
//   - Manager.Status reports each subscription's state (pending,
//     subscribed, retrying, stopped), attempts, last error and since when.
//   - Close (or Shutdown, bounded by a context) is idempotent, stops every
//     subscription, unsubscribes from the registry and waits for every
//     goroutine of the Manager.
//
// Logging goes through an injected *zap.Logger (WithLogger, default none)
// and package logging's throttled Loop: a subscription failing for an hour
// writes a handful of lines, each attempt at Debug.
//
// # Writing an adapter
//
// See Registry, Sink and ConnectionMonitor. An adapter makes one attempt per
// Subscribe call and never retries on its own; it keeps exactly one
// delivery per Sink however often Subscribe is called; it maps "client
// closed" to ErrRegistryClosed. An etcd adapter, for example, would Get the
// prefix and Watch from the next revision in Subscribe (replacing any watch
// of the same Sink), call Sink.Update with the full list after the Get and
// after every event, and call Sink.Resubscribe when the watch fails or its
// revision is compacted.
package subscriber
