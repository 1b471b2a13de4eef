package failback

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
)

// The retry path of a queued call, in the order it runs: a worker takes a
// due task and its Schedule admits the retry (work), the retry is sent
// (run), and the task is filed by the outcome (settle): requeued (stored,
// reported, pushed) or finished. Circuit breakers are in docs/failback.md.

type outcome int

const (
	outSucceeded outcome = iota
	outRequeued
	outGaveUp
	outDropped
)

// minBreakerWait is the shortest wait for a breaker, so that a clock that
// disagrees with the breaker's by a little cannot make a retry spin.
const minBreakerWait = time.Millisecond

// work is a retry worker: it runs ready tasks one at a time. It never dies
// of a panic in user code: run recovers them.
func (f *Invoker) work() {
	defer f.exit()
	for {
		f.mu.Lock()
		for f.readyHead == len(f.ready) && f.state != stateClosed {
			f.cond.Wait()
		}
		if f.state == stateClosed {
			f.mu.Unlock()
			return
		}
		t := f.popReadyLocked()
		f.inflight++
		now := f.now()
		// The TTL bounds the start of an attempt: time spent waiting for a
		// worker counts. (So does MaxElapsed: Admit stops a retry that
		// comes due after it.)
		expired := now > t.expires
		f.mu.Unlock()
		if expired {
			f.finish(t, outDropped, dropExpired, nil, nil, now)
			continue
		}
		// The budget (rebound.WithBudget, under admit.Drop) and the
		// throttle (rebound.WithThrottle, under admit.Defer) admit the
		// retry, each once per attempt.
		att, dec := t.sched.Admit(f.at(now))
		if dec.Stop || dec.Delay > 0 {
			f.refused(t, dec, now) // rescheduled, dropped or ended without an attempt
			continue
		}
		t.att = att
		f.run(t, dec.Attempt)
	}
}

// run makes one retry attempt of t (held by this worker, counted in
// inflight, after n failed attempts) and files the task by its outcome.
// If the selected target is at its concurrency bound, the task is parked
// for it instead, without an attempt (see begin). A retry a breaker
// refused waits for it (breakerHold). The attempt's context is cancelled
// by Close, bounded by the attempt timeout, with the caller's values under
// WithContextValues.
func (f *Invoker) run(t *task, n int) {
	ctx, cancel := f.baseCtx, context.CancelFunc(nil)
	if t.values != nil {
		ctx = t.values
	}
	if d := f.cfg.attemptTimeout; d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	release := cancel
	if t.values != nil {
		stop := context.AfterFunc(f.baseCtx, cancel)
		release = func() { stop(); cancel() }
	}
	target, pe, err := f.safeSelect(ctx, t)
	tg := targetOf(target)
	// Held for a breaker List names, or parked: t is no longer this worker's.
	if boe, ok := errors.AsType[*cluster.BreakerOpenError](err); (ok && target == nil && pe == nil &&
		f.breakerHold(t, err, boe.Until, false)) || !f.begin(t, target, tg) {
		release()
		return
	}
	t.attempts = counted(n) + 1       // the attempt about to be sent counts from now on
	ctx, span := f.startRetry(ctx, t) // trace.go; a nil span without a tracer
	if target != nil {
		pe, err = safeInvoke(ctx, target, t.inv)
		f.endedOn(tg)
	}
	release()
	if boe, ok := errors.AsType[*cluster.BreakerOpenError](err); ok && target != nil && pe == nil && f.breakerHold(t, err, boe.Until, true) {
		f.endRetry(span, outRequeued, err) // held for the breaker: t is no longer this worker's
		return
	}
	t.lastTarget = tg
	now := f.now()
	out, drop, delay, reason := outSucceeded, dropReason(""), time.Duration(0), error(nil)
	switch {
	case pe != nil:
		f.logPanic(pe, t.inv)
		out, reason = outGaveUp, errPanicked
	case err == nil:
		t.att.Done(nil, f.at(now)) // an accept for the throttle
	case isStopping(err):
		out, drop = outDropped, dropClosed // the transport is stopping: kept for the next process
	case errors.Is(err, context.Canceled) && f.baseCtx.Err() != nil:
		out, drop = outDropped, dropClosed // cancelled by Close: not the call's own outcome
	case !f.retryable(err):
		// Not retried: the engine hears of it as a permanent failure
		// (the provider answered: an accept for the throttle).
		out, reason = outGaveUp, errNotRetryable
		t.att.Done(rebound.Permanent(err), f.at(now))
	default:
		// The Schedule gives the wait: the policy, a Retry-After capped by
		// Policy.MaxRetryAfter, the limits.
		dec := t.att.Done(err, f.at(now))
		t.attempts, delay = counted(dec.Attempt), dec.Delay
		switch due := satAdd(now, delay); {
		case dec.Stop:
			out, reason, delay = outGaveUp, stopReason(dec.Err), 0
		case due > t.expires:
			out, drop = outDropped, dropExpired
		case f.baseCtx.Err() != nil:
			out, drop = outDropped, dropClosed // would retry, but Close began
		default:
			out, t.due = outRequeued, due
		}
	}
	if err != nil && pe == nil {
		t.lastErr = err
		if target != nil && !slices.ContainsFunc(t.failed, func(iv cluster.Invoker) bool { return iv.Target() == tg }) {
			t.failed = append(t.failed, target) // once per Target
		}
	}
	if span != nil {
		t.ended = now
		f.endRetry(span, out, err)
	}
	f.settle(t, out, drop, delay, reason, err, now, "failback: retry failed")
}

// safeSelect lists and selects for one retry of t, with panics of the
// Directory and the LoadBalance recovered as a *cluster.PanicError. It avoids the
// invokers that failed for t and, while another one is left, those whose
// target is at its concurrency bound (half the workers).
func (f *Invoker) safeSelect(ctx context.Context, t *task) (target cluster.Invoker, pe *cluster.PanicError, err error) {
	op := "cluster.Directory.List"
	defer func() {
		if r := recover(); r != nil {
			pe = &cluster.PanicError{Op: op, Value: r, Stack: debug.Stack()}
			target, err = nil, pe
		}
	}()
	invokers, err := f.dir.List(ctx, t.inv)
	if err != nil {
		return nil, nil, err
	}
	op = "cluster.LoadBalance.Select"
	exclude := t.failed
	if busy := f.busyTargets(invokers); len(busy) > 0 && len(busy) < len(invokers) {
		exclude = append(busy, t.failed...)
	}
	target, err = f.lb.Select(invokers, t.inv, exclude)
	if err != nil {
		return nil, nil, err
	}
	if target == nil {
		return nil, nil, errNilInvoker
	}
	return target, nil, nil
}

// busyTargets returns the invokers of invokers whose target is at its
// concurrency bound, nil if none is.
func (f *Invoker) busyTargets(invokers []cluster.Invoker) []cluster.Invoker {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.running) == 0 {
		return nil
	}
	var busy []cluster.Invoker
	for _, iv := range invokers {
		if iv != nil && f.running[iv.Target()] >= f.cfg.perTarget {
			busy = append(busy, iv)
		}
	}
	return busy
}

// safeInvoke calls target, with a panic recovered as a *cluster.PanicError.
func safeInvoke(ctx context.Context, target cluster.Invoker, inv *cluster.Invocation) (pe *cluster.PanicError, err error) {
	defer func() {
		if r := recover(); r != nil {
			pe = &cluster.PanicError{Op: "cluster.Invoker.Invoke", Value: r, Stack: debug.Stack()}
			err = pe
		}
	}()
	_, err = target.Invoke(ctx, inv)
	return nil, err
}

// begin counts the retry of t on target, tg its Target, as started. If
// tg is at its concurrency bound, it parks t for tg instead (t is then no
// longer this worker's) and returns false; endedOn unparks it.
func (f *Invoker) begin(t *task, target cluster.Invoker, tg string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if target != nil && f.running[tg] >= f.cfg.perTarget && f.state != stateClosed {
		f.inflight--
		f.parked[tg] = append(f.parked[tg], t)
		f.nparked++
		return false
	}
	f.retried++
	if target != nil {
		f.running[tg]++
	}
	return true
}

// endedOn frees the slot of an attempt on tg that ended, and unparks a task
// parked for tg, or else one parked for another target. A task parks for
// the target the load balance chose when every target was at its bound,
// which may be a hanging one; letting any ending attempt unpark it sends it
// through the selection again, where a target with a free slot wins. Each
// unpark follows an ended attempt, so this never spins.
func (f *Invoker) endedOn(tg string) {
	f.mu.Lock()
	if f.running[tg]--; f.running[tg] == 0 {
		delete(f.running, tg)
	}
	pk := tg
	if len(f.parked[pk]) == 0 {
		for other := range f.parked {
			pk = other
			break
		}
	}
	q := f.parked[pk]
	if len(q) == 0 {
		f.mu.Unlock()
		return
	}
	f.ready = append(f.ready, q[0])
	q[0] = nil
	if len(q) == 1 {
		delete(f.parked, pk)
	} else {
		f.parked[pk] = q[1:]
	}
	f.nparked--
	f.mu.Unlock()
	f.cond.Signal()
}

// breakerHold requeues t, held by this worker, until the breaker that
// refused its retry with err lets a probe through (until), and reports
// whether it did: a wait that would end after t's TTL is not taken. sent reports
// that the attempt was counted as started (the refusal came from the
// invoker, not from List): it is uncounted. docs/failback.md describes
// the waits.
func (f *Invoker) breakerHold(t *task, err error, until time.Time, sent bool) bool {
	now := f.now()
	wait := max(time.Until(until), minBreakerWait) // shadowcheck:allow the open time of a target's breaker in the Directory, not a backoff
	due := satAdd(now, wait)
	if due > t.expires {
		return false
	}
	f.mu.Lock()
	if sent {
		t.attempts = counted(admit.Attempts(t.sched)) // the refused attempt was not sent: the Schedule never counted it
		f.retried--
	}
	f.breakerWaits++
	f.mu.Unlock()
	t.due = due
	f.settle(t, outRequeued, "", wait, nil, err, now, "failback: retry waits for a circuit breaker")
	return true
}

// refused files t, whose retry its Schedule did not admit at now (dec);
// t is no longer this worker's:
//
//   - the budget refused it (Stop, Reason ErrBudgetExhausted,
//     under admit.Drop): dropped with dropBudget;
//   - the retry came due after MaxElapsed (Stop, no Reason): given up;
//   - the throttle refused it: the retry counts as a failed attempt that
//     was never sent (error rebound.ErrThrottled): t is requeued for the
//     policy's next delay, reported (EventRetry) like a failed retry
//     and counted in Stats.Throttled, or, when the policy allows no
//     further attempt (Stop), ends in GaveUp (Reason
//     rebound.ErrExhausted, Last rebound.ErrThrottled); the TTL and Close
//     apply as for a failed retry.
//
// The invoker's Retrier has no limiter and no breaker: a wait is always a
// refusal's backoff.
func (f *Invoker) refused(t *task, dec rebound.Decision, now int64) {
	if dec.Stop {
		if errors.Is(dec.Reason, rebound.ErrBudgetExhausted) { // a refusal under admit.Drop (retriers)
			f.finish(t, outDropped, dropBudget, nil, nil, now)
			return
		}
		if dec.Reason == nil { // not a refusal: the retry came due after MaxElapsed
			f.finish(t, outGaveUp, "", stopReason(dec.Err), t.lastErr, now)
			return
		}
	}
	t.attempts = counted(dec.Attempt) // the Schedule counted the refused attempt
	t.lastErr = rebound.ErrThrottled
	f.mu.Lock()
	f.throttledN++
	f.mu.Unlock()
	out, drop, reason := outRequeued, dropReason(""), error(nil)
	switch due := satAdd(now, dec.Delay); {
	case dec.Stop:
		out, reason = outGaveUp, stopReason(dec.Err)
	case due > t.expires:
		out, drop = outDropped, dropExpired
	case f.baseCtx.Err() != nil:
		out, drop = outDropped, dropClosed // would retry, but Close began
	default:
		t.due = due
	}
	f.settle(t, out, drop, dec.Delay, reason, rebound.ErrThrottled, now, "failback: retry rejected locally by the throttle")
}

// stopReason is the Reason of a Schedule's *rebound.RetryError stop.
func stopReason(stop error) error {
	if re, ok := errors.AsType[*rebound.RetryError](stop); ok {
		return re.Reason
	}
	return stop
}

// settle files t, held by this worker, by the outcome of its attempt:
// requeued (stored, logged with msg, reported (EventRetry), pushed) or
// finished.
func (f *Invoker) settle(t *task, out outcome, drop dropReason, delay time.Duration, reason, err error, now int64, msg string) {
	if out == outRequeued && f.cfg.durable.store != nil && !f.storeRetried(t) {
		out, drop = outDropped, dropClosed // held by another Invoker now: it stays stored
	}
	if out == outRequeued {
		// Report before the task can run again, so that the hooks of one
		// call never overlap.
		if ce := f.log.Check(zapcore.DebugLevel, msg); ce != nil {
			ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
				zap.String("target", t.lastTarget), zap.Duration("delay", delay), zap.Error(err))
		}
		if f.observed() {
			if pe := f.emit(rebound.EventRetry, t, err, delay, now, nil); pe != nil {
				f.finish(t, outGaveUp, "", errPanicked, pe, now)
				return
			}
		}
		f.mu.Lock()
		if f.state != stateClosed {
			f.inflight--
			f.pushLocked(t)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		out, drop = outDropped, dropClosed
	}
	f.finish(t, out, drop, reason, err, now)
}

// finish counts and reports the end of a task held by this worker.
func (f *Invoker) finish(t *task, out outcome, drop dropReason, reason, err error, now int64) {
	if f.cfg.durable.store != nil { // while the task still counts as pending
		f.storeEnded(t, drop)
	}
	f.mu.Lock()
	f.inflight--
	switch out {
	case outSucceeded:
		f.succeeded++
	case outGaveUp:
		f.gaveUp++
	case outDropped:
		f.dropped[dropIndex(drop)]++
	}
	f.endLocked()
	f.mu.Unlock()

	switch out {
	case outSucceeded:
		if ce := f.log.Check(zapcore.DebugLevel, "failback: retry succeeded"); ce != nil {
			ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
				zap.String("target", t.lastTarget), zap.Duration("age", time.Duration(now-t.born)))
		}
		if f.observed() {
			_ = f.emit(rebound.EventRecovered, t, nil, 0, now, nil)
		}
	case outGaveUp:
		f.gaveUpReport(t, reason, err, now)
	case outDropped:
		f.droppedReport(t, drop, now)
	}
}

func targetOf(iv cluster.Invoker) string {
	if iv == nil {
		return ""
	}
	return iv.Target()
}
