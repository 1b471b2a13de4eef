// Package failback is a failback cluster invoker: a call whose first
// attempt fails with a retryable error is queued and retried in the
// background, and the caller gets (nil, nil) at once. It is meant for calls
// whose caller does not wait for an answer: notifications, audit records,
// cache invalidations.
//
//	fb, err := failback.New(dir) // dir: a cluster.Directory
//	defer fb.Close(ctx)
//	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify", Args: args})
//	// err == nil: delivered, or queued for retry
//	// err != nil: not delivered and not queued (see below)
//
// # What it does differently
//
// The failback invokers of Apache Dubbo and dubbo-go retry on a fixed 5 s
// interval (so calls that failed together retry together, wave after wave),
// poll a FIFO queue with a 1 s ticker (so a task with a long delay blocks
// those behind it), check the task limit without a lock, make one retry too
// many, run each retry in its own goroutine, retry business errors, and drop
// pending retries at shutdown without telling anyone. This package:
//
//   - gives each task its own jittered BackOff (rebound.Policy, full jitter,
//     1 s doubling to 60 s by default) and honours a Retry-After carried by
//     the error (rebound.RetryAfter);
//   - schedules tasks by due time on a min-heap (container/heap) served by
//     one goroutine sleeping on one timer set to the earliest due time: no
//     polling, no head-of-line blocking, O(log n) per task;
//   - runs retries on a fixed pool of workers (WithConcurrency, default 8);
//   - bounds the tasks queued plus running under one lock (WithMaxTasks,
//     default 100);
//   - makes exactly WithRetries(n) retries (default 3), 0 meaning none;
//   - retries only what the classifier calls retryable (DefaultRetryable:
//     network errors, the attempt's own deadline, cluster.Transient, an
//     empty directory); rebound.Permanent always wins;
//   - re-lists the Directory for every retry and avoids the invokers that
//     already failed for the task while another one exists;
//   - runs retries under a fresh context (the caller's values only with
//     WithContextValues; never the caller's cancellation), bounded by
//     WithAttemptTimeout (default 10 s);
//   - accounts for every call: Invoke returns the error of any call that
//     will not be retried, and each queued call ends in exactly one of the
//     Succeeded, GaveUp or Dropped hooks and Stats counters, Close
//     included.
//
// # Invoke's result
//
// Invoke returns the result of a successful first attempt. Otherwise:
//
//	not retryable, or caller's ctx done     the error, unchanged
//	retryable, WithRetries(0)               the error, unchanged
//	retryable, queued                       (nil, nil)
//	retryable, task limit reached           *RejectedError: ErrQueueFull + the error
//	retryable, Close has begun              *RejectedError: ErrClosed + the error
//	after Close                             ErrClosed (no attempt)
//
// # Goroutines and hooks
//
// New starts one scheduler goroutine and the worker pool; Close cancels
// running attempts, reports queued tasks as dropped, and waits for the
// goroutines (bounded by its context). Hooks are called with no lock held;
// see Hooks for which goroutine calls each.
//
// # Logging
//
// WithLogger takes a *zap.Logger (default: none; never zap's global
// logger). Lines carry component=failback and go through
// logging.Redacted. Per-task events are logged at Debug, give-ups and drops
// at Warn; a full queue is logged like a failing loop (logging.Loop): one
// Warn per episode, not one per refused call.
package failback
