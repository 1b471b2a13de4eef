// Package failback is a failback cluster invoker: a call whose first
// attempt fails with a retryable error is queued and retried in the
// background, and the caller gets (nil, nil) at once. It is meant for calls
// whose caller does not wait for an answer: notifications, audit records,
// cache invalidations.
//
//	fb, err := failback.New(dir) // dir: a cluster.Directory
//	defer fb.Shutdown(ctx)       // drains pending retries, bounded by ctx
//	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify", Args: args})
//	// err == nil: delivered, or queued for retry
//	// err != nil: not delivered and not queued (see below)
//
// # What it does differently
//
// Unlike the failback invokers of Apache Dubbo and dubbo-go, each call has
// its own jittered backoff, scheduled by due time on one timer (no polling),
// run by a fixed pool of workers with at most half of them on one target.
// Retries may draw from a shared budget and throttle. Every call ends in
// exactly one reported outcome, Shutdown and Close included, and panics in
// user code end the call, not the process. docs/failback.md compares them
// point by point.
//
// # Invoke's result
//
// Invoke returns the result of a successful first attempt. Otherwise:
//
//	not retryable                           the error, matching ErrNotRetryable
//	caller's ctx done, rebound.Permanent    the error, unchanged
//	retryable, WithMaxAttempts(1) limit     the error, unchanged
//	retryable, queued                       (nil, nil)
//	retryable, task limit reached           ErrQueueFull + the error
//	retryable, TTL shorter than first wait  ErrExpired + the error
//	retryable, Shutdown/Close has begun     ErrClosed + the error
//	marked Stopping, no Store               the error, unchanged
//	marked Stopping, with a Store           (nil, nil): queued and stored
//	marked Stopping, WithMaxAttempts(1)     the error, unchanged (even with a Store)
//	after Shutdown or Close began           ErrClosed (no attempt)
//
// # Goroutines and observers
//
// New starts one scheduler goroutine and the worker pool. Like
// net/http.Server, Shutdown(ctx) drains (queued calls keep being retried
// until each has ended, or ctx is done) and then stops; Close stops at
// once: it cancels running attempts and reports queued tasks as dropped.
// Both return after every call has been reported and the goroutines have
// exited. Shutdown's result says how the invoker ended, whatever the order
// of the calls: nil after a completed drain, ctx.Err() for the Shutdown
// whose ctx ended it, ErrClosed once Close stopped it first (like
// net/http.Server's ErrServerClosed). Observers (WithObserver) are called
// with no lock held; see Task for the events, and docs/failback.md for
// which goroutine calls each and what a slow observer holds up. An observer may call
// Close or Shutdown: from an observer (which they would otherwise wait
// for) they start the stop, return rebound.ErrCalledFromCallback at once,
// and the invoker finishes stopping in the background once the observer
// has returned, as subscriber.Manager's Close does from a listener.
//
// # Stored calls
//
// WithStore keeps queued calls on disk (package failback/boltstore), so a
// crash or a deploy hands them to the next process; every stored call
// carries an IdempotencyKey (a caller's non-empty key is kept, an empty
// one is replaced). On loading, New:
//
//   - clamps times written under a clock that was ahead: a stored
//     first failure is no later than now, a stored due time no later than
//     now plus the policy's longest wait (max(Max, MaxRetryAfter)), so a
//     corrected clock cannot stretch a backoff or a TTL;
//   - fails on a record it cannot load, with an error naming it
//     (ErrBadRecord: ID, method, and the Store's words on where it is), by
//     default; with WithQuarantine it sets such records aside in the Store (a
//     Quarantiner) and counts them in Stats.Quarantined instead.
//
// A transport that is shutting down under the invoker (a gRPC ClientConn
// closed before it) is not the call's fault: an Invoker that marks such
// errors with Stopping gets its calls dropped with ErrClosed, and kept in
// the Store for the next process, instead of given
// up. A first attempt failing that way is queued (stored) with a Store, and
// returned unchanged without one.
//
// # Teardown order
//
// Stop the producers of calls first, then the failback invoker (Shutdown,
// or Close), then what feeds its Directory (the subscriber.Manager), then
// the Directory (RegistryDirectory.Close closes the invokers), then the
// registry client:
//
//	_ = fb.Shutdown(ctx) // drain, bounded by ctx
//	_ = mgr.Shutdown(ctx)
//	_ = dir.Close()
//
// # Logging
//
// WithLogger takes a *zap.Logger (default: none; never zap's global
// logger). Lines carry component=failback and go through
// logging.Redacted. Per-task events are logged at Debug, give-ups and drops
// at Warn; a full queue is logged like a failing loop (logging.Loop): one
// Warn per episode, not one per refused call.
//
// # Circuit breakers
//
// Give New a *cluster.BreakerDirectory (a breaker per target) with the
// same classifier as WithRetryable, and every attempt selects only targets
// whose breaker admits it:
//
//	dir, _ := cluster.NewBreakerDirectory(registryDir, cluster.WithBreakerClassifier(failback.DefaultRetryable))
//	fb, _ := failback.New(dir)
//
// A retry that no breaker admits (a *cluster.BreakerOpenError) waits until
// the earliest half-open instead of spending an attempt: its EventRetry
// has the error and the wait as Err and Delay, Attempts is unchanged, and
// Stats.BreakerWaits counts it. See docs/breaker.md.
package failback
