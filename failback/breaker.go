package failback

import (
	"errors"
	"time"

	"github.com/rebound-go/rebound/cluster"
)

// Circuit breakers (see also the package doc): give New a
// *cluster.BreakerDirectory as its Directory and every retry selects only
// targets whose breaker admits it.
//
//	dir, err := cluster.NewBreakerDirectory(registryDir, cluster.WithBreakerSettings(
//		func(string) gobreaker.Settings { // what failback retries is what trips
//			return gobreaker.Settings{IsSuccessful: func(err error) bool { return !failback.DefaultRetryable(err) }}
//		}))
//	f, err := failback.New(dir)
//
// When no breaker admits the retry (every target out of selection: the
// ejection share is 1, or the remaining targets are half-open with their
// probe taken), the directory's List returns a *cluster.BreakerOpenError
// and the retry waits until its Until, the earliest end of an open
// timeout, instead of spending an attempt: the task is requeued with its
// attempt count unchanged, an EventRetry is emitted with Err the
// *cluster.BreakerOpenError and Delay the wait, and Stats.BreakerWaits
// counts it. The same holds for a retry whose selected target's breaker
// refused it at the last moment (two retries raced for one half-open
// probe): the refused attempt was never sent, so it is not counted in
// Attempts nor in Stats.Retried. A wait that would end after the call's
// TTL is not taken: the refusal then counts as a failed attempt (which
// drops the call with dropExpired, as any retry due after its TTL). The
// policy's MaxElapsed still bounds the start of the next attempt.

// minBreakerWait is the shortest wait for a breaker, so that a clock that
// disagrees with the breaker's by a little cannot make a retry spin.
const minBreakerWait = time.Millisecond

// breakerHold requeues t, held by this worker, until the breaker that
// refused its retry with err lets a probe through, and reports whether it
// did. sent reports that the attempt was counted as started (the refusal
// came from the invoker, not from List): it is uncounted.
func (f *Invoker) breakerHold(t *task, err error, sent bool) bool {
	boe, ok := errors.AsType[*cluster.BreakerOpenError](err)
	if !ok {
		return false
	}
	now := f.now()
	wait := max(time.Until(boe.Until), minBreakerWait) // shadowcheck:allow the open time of a target's breaker in the Directory, not a backoff
	due := satAdd(now, wait)
	if due > t.expires {
		return false
	}
	f.mu.Lock()
	if sent {
		t.made(0) // the refused attempt was not sent: the Schedule never counted it
		f.retried--
	}
	f.breakerWaits++
	f.mu.Unlock()
	t.due = due
	f.settle(t, outRequeued, "", wait, nil, err, now, "failback: retry waits for a circuit breaker")
	return true
}
