// Package rebound keeps Go services subscribed to their service registry and
// retries failed fire-and-forget calls in the background, without the bugs
// that hand-written retry loops tend to have: busy-spins, fixed-interval
// retry waves, sleeps that ignore cancellation, exponential delays that
// overflow into negative numbers, retries of errors that can never succeed,
// and ignoring a server's Retry-After.
//
// This package is the retry core. Every loop in rebound runs on it:
//
//   - Policy describes capped exponential backoff with jitter. Its zero value
//     is usable (1 s, doubling, capped at 30 s, full jitter, no limits).
//     Validate names every bad field; NewBackOff builds a fresh
//     backoff.BackOff (github.com/cenkalti/backoff/v4) for one loop, from
//     the normalized policy, so no configuration can panic or spin.
//   - Retry runs an operation under a Policy on cenkalti/backoff's
//     RetryNotifyWithTimer. Every attempt gets the context; every wait ends
//     when it is done. Errors say why the loop stopped and wrap the last
//     attempt's error.
//   - Permanent marks an error that retrying cannot fix; WithClassifier
//     decides which other errors are transient.
//   - RetryAfter carries a server's "retry after d" instruction, which beats
//     the formula.
//   - WithLimiter shares a golang.org/x/time/rate limiter between loops, so
//     that thousands of loops recovering at once cannot exceed a global
//     retry rate.
//   - WithClock, WithTimer and WithSeed make time and randomness injectable;
//     the tests use testing/synctest instead of sleeping.
//
// The other packages build on it:
//
//   - subscriber: a Manager that subscribes until the registry acknowledges,
//     and confirms every subscription again after the registry restarts;
//     subscriber/nacos adapts nacos-sdk-go/v2, and subscriber/nacos/nacostest
//     is an in-process Nacos server for tests and examples.
//   - cluster and failback: a failback cluster invoker whose retries are
//     scheduled by due time with per-task jittered backoff, bounded tasks and
//     workers, and no silent loss.
//   - logging: zap hooks that log a failing loop in a handful of lines.
//
// Concurrency: Policy is a value and safe to share; a backoff.BackOff from
// NewBackOff is not safe for concurrent use (build one per loop); Retry may
// be called from any number of goroutines.
package rebound
