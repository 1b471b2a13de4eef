// Package failback retries calls in the background: a call whose first
// attempt fails with a retryable error is queued, and Invoke returns (nil,
// nil) at once. It suits calls nobody waits for: notifications, audit
// records, cache invalidations.
//
//	fb, err := failback.New(dir) // dir: a cluster.Directory
//	defer fb.Shutdown(ctx)       // drains pending retries, bounded by ctx
//	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify", Args: args})
//	// err == nil: delivered, or queued for retry
//	// err != nil: not delivered and not queued (see below)
//
// Each call has its own jittered backoff, scheduled by due time on one
// timer. A fixed pool of workers runs the retries, at most half on one
// target. Every call ends in exactly one reported outcome (see Task).
//
// # Invoke's result
//
// Invoke returns the result of a successful first attempt. Otherwise:
//
//	not retryable                           the error, saying it was not retried
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
// WithStore keeps the queued calls in a Store (failback/boltstore), so the
// next process retries them. A stored call that cannot be decoded (its
// record, or its arguments by the Codec) is never run: it fails New, or is
// set aside with WithQuarantine; one a shared Store (Claimer) hands out is
// set aside with WithQuarantine, else logged at Error and released, to be
// claimed again when its lease ends. Stop the producers of calls first,
// then the invoker, then its Directory. docs/failback.md describes
// goroutines, stores, logging, breakers and teardown.
package failback
