package failback

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
)

// The retry path of a queued call, in the order it runs: a worker picks a
// due task and its Schedule admits the retry (work); run selects a target
// and sends the attempt, in its trace span and with the call's idempotency
// key, and its Schedule hears the outcome (outcomeOf); settle records the
// outcome (the Store, then the observers) and requeues the task or ends it
// (end). Circuit breakers are in docs/failback.md.

type outcome int

const (
	outSucceeded outcome = iota
	outRequeued
	outGaveUp
	outDropped
)

// result is how a task's turn with a worker ended, as settle files it.
type result struct {
	out    outcome
	drop   dropReason    // outDropped: why
	delay  time.Duration // outRequeued: the wait before the next attempt
	reason error         // outGaveUp: the Reason of the give-up
	err    error         // the last attempt's error; nil after a success
	msg    string        // outRequeued: the Debug line
}

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
			f.settle(t, result{out: outDropped, drop: dropExpired}, now)
			continue
		}
		// The budget (rebound.WithBudget, under admit.Drop) and the
		// throttle (rebound.WithThrottle, under admit.Defer) admit the
		// retry, each once per attempt.
		att, dec := t.sched.Admit(f.at(now))
		if dec.Stop || dec.Delay > 0 {
			f.settle(t, f.refused(t, dec, now), now) // requeued, dropped or ended without an attempt
			continue
		}
		t.att = att
		f.run(t, dec.Attempt)
	}
}

// refused returns how t ends its turn when its Schedule did not admit its
// retry at now (dec), without an attempt:
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
func (f *Invoker) refused(t *task, dec rebound.Decision, now int64) result {
	if dec.Stop {
		if errors.Is(dec.Reason, rebound.ErrBudgetExhausted) { // a refusal under admit.Drop (retriers)
			return result{out: outDropped, drop: dropBudget}
		}
		if dec.Reason == nil { // not a refusal: the retry came due after MaxElapsed
			return result{out: outGaveUp, reason: stopReason(dec.Err), err: t.lastErr}
		}
	}
	t.attempts = counted(dec.Attempt) // the Schedule counted the refused attempt
	t.lastErr = rebound.ErrThrottled
	f.mu.Lock()
	f.throttledN++
	f.mu.Unlock()
	return f.afterFailure(t, dec, now, result{err: rebound.ErrThrottled, msg: "failback: retry rejected locally by the throttle"})
}

// run makes one retry attempt of t (held by this worker, counted in
// inflight, after n failed attempts) and files the task by its outcome.
// If the selected target is at its concurrency bound, the task is parked
// for it instead, without an attempt (see begin). A retry a breaker
// refused waits for it (breakerHold).
func (f *Invoker) run(t *task, n int) {
	ctx, release := f.attemptContext(t)
	target, pe, err := f.safeSelect(ctx, t)
	tg := targetOf(target)
	// Held for a breaker List names, or parked: t is no longer this worker's.
	if boe, ok := errors.AsType[*cluster.BreakerOpenError](err); (ok && target == nil && pe == nil &&
		f.breakerHold(t, err, boe.Until, false)) || !f.begin(t, target, tg) {
		release()
		return
	}
	t.attempts = counted(n) + 1       // the attempt about to be sent counts from now on
	ctx, span := f.startRetry(ctx, t) // a nil span without a tracer
	if target != nil {
		// t.inv carries its IdempotencyKey under WithStore (set by Invoke
		// or loaded with the call): the same on every attempt.
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
	r := f.outcomeOf(t, pe, err, now)
	if err != nil && pe == nil {
		t.lastErr = err
		if target != nil && !slices.ContainsFunc(t.failed, func(iv cluster.Invoker) bool { return iv.Target() == tg }) {
			t.failed = append(t.failed, target) // once per Target
		}
	}
	if span != nil {
		t.ended = now
		f.endRetry(span, r.out, err)
	}
	f.settle(t, r, now)
}

// attemptContext returns the context of a retry attempt of t and the
// function that frees it: cancelled by Close, bounded by the attempt
// timeout, with the caller's values under WithContextValues.
func (f *Invoker) attemptContext(t *task) (context.Context, context.CancelFunc) {
	ctx, cancel := f.baseCtx, context.CancelFunc(nil)
	if t.values != nil {
		ctx = t.values
	}
	if d := f.cfg.attemptTimeout; d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	if t.values == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(f.baseCtx, cancel)
	return ctx, func() { stop(); cancel() }
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

func targetOf(iv cluster.Invoker) string {
	if iv == nil {
		return ""
	}
	return iv.Target()
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
	f.settle(t, result{out: outRequeued, delay: wait, err: err, msg: "failback: retry waits for a circuit breaker"}, now)
	return true
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

// startRetry starts the span of t's retry (t.attempts already counts it),
// a new root linked to the trace that queued t. Without a tracer it
// returns ctx and a nil span.
func (f *Invoker) startRetry(ctx context.Context, t *task) (context.Context, trace.Span) {
	if f.cfg.tracer == nil {
		return ctx, nil
	}
	since := t.ended
	if since == 0 {
		since = t.born
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(
		attribute.Int("rebound.attempt", int(t.attempts)),
		attribute.Float64("rebound.attempt.wait", max(time.Duration(f.now()-since), 0).Seconds()))}
	if sc := queuedBy(t.inv); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return f.cfg.tracer.Start(ctx, spanAttempt, opts...)
}

// queuedBy returns the span context kept in inv's Attachments, if any.
func queuedBy(inv *cluster.Invocation) trace.SpanContext {
	if inv.Attachments[traceContextKey] == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), attachmentCarrier(inv.Attachments))
	return trace.SpanContextFromContext(ctx)
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

// endRetry ends the span of a retry by its outcome; a nil span is none.
func (f *Invoker) endRetry(span trace.Span, out outcome, err error) {
	if span == nil {
		return
	}
	switch {
	case out == outSucceeded:
		span.SetAttributes(attribute.String("rebound.verdict", "success"))
	case out == outRequeued:
		f.failedSpan(span, err, "retry")
	default:
		f.failedSpan(span, err, "stop")
	}
	span.End()
}

// outcomeOf classifies the outcome of t's attempt that ended at now with
// err (pe: a panic it recovered, then logged) and tells t's Schedule,
// which gives the wait before the next attempt.
func (f *Invoker) outcomeOf(t *task, pe *cluster.PanicError, err error, now int64) result {
	r := result{err: err, msg: "failback: retry failed"}
	switch {
	case pe != nil:
		f.logPanic(pe, t.inv)
		r.out, r.reason = outGaveUp, errPanicked
	case err == nil:
		t.att.Done(nil, f.at(now)) // an accept for the throttle
	case isStopping(err):
		r.out, r.drop = outDropped, dropClosed // the transport is stopping: kept for the next process
	case errors.Is(err, context.Canceled) && f.baseCtx.Err() != nil:
		r.out, r.drop = outDropped, dropClosed // cancelled by Close: not the call's own outcome
	case !f.retryable(err):
		// Not retried: the engine hears of it as a permanent failure
		// (the provider answered: an accept for the throttle).
		r.out, r.reason = outGaveUp, errNotRetryable
		t.att.Done(rebound.Permanent(err), f.at(now))
	default:
		// The Schedule gives the wait: the policy, a Retry-After capped by
		// Policy.MaxRetryAfter, the limits.
		dec := t.att.Done(err, f.at(now))
		t.attempts = counted(dec.Attempt)
		r = f.afterFailure(t, dec, now, r)
	}
	return r
}

// afterFailure files r, a failed attempt of t (refused or sent), by the
// Schedule's decision dec at now: given up when dec stops, dropped when
// the next attempt would come due after the TTL or Close began, else
// requeued for dec.Delay (t.due set).
func (f *Invoker) afterFailure(t *task, dec rebound.Decision, now int64, r result) result {
	switch due := satAdd(now, dec.Delay); {
	case dec.Stop:
		r.out, r.reason = outGaveUp, stopReason(dec.Err)
	case due > t.expires:
		r.out, r.drop = outDropped, dropExpired
	case f.baseCtx.Err() != nil:
		r.out, r.drop = outDropped, dropClosed // would retry, but Close began
	default:
		r.out, r.delay, t.due = outRequeued, dec.Delay, due
	}
	return r
}

// stopReason is the Reason of a Schedule's *rebound.RetryError stop.
func stopReason(stop error) error {
	if re, ok := errors.AsType[*rebound.RetryError](stop); ok {
		return re.Reason
	}
	return stop
}

// settle files t, held by this worker, by the outcome r of its turn at
// now: recorded in the Store (storeOutcome), then requeued (reported,
// EventRetry, then pushed) or ended (end).
func (f *Invoker) settle(t *task, r result, now int64) {
	if !f.storeOutcome(t, r.out, r.drop) {
		r.out, r.drop = outDropped, dropClosed // held by another Invoker now: it stays stored
	}
	if r.out == outRequeued {
		// Reported before the task can run again, so that the hooks of
		// one call never overlap.
		pe := f.retryReport(t, r.msg, r.delay, r.err, now)
		f.mu.Lock()
		if pe == nil && f.state != stateClosed {
			f.inflight--
			f.pushLocked(t)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		r.out, r.drop = outDropped, dropClosed // Close began
		if pe != nil {
			// An observer panicked: the call gives up.
			r = result{out: outGaveUp, reason: errPanicked, err: pe}
			f.storeOutcome(t, r.out, "")
		}
	}
	f.end(t, r, now)
}

// storeOutcome records the outcome of t's turn in the Store (WithStore),
// in one call: a requeued call's attempts and due time (Update), else its
// removal (Remove), except for a call dropped by Close (dropClosed), which
// stays for the next Invoker. It returns false if a shared Store says
// another Invoker holds t now (ErrLeaseLost). The Store's errors and
// panics are logged: it runs on a retry worker.
func (f *Invoker) storeOutcome(t *task, out outcome, drop dropReason) (kept bool) {
	st, requeued := f.cfg.durable.store, out == outRequeued
	if st == nil || t.sid == 0 || (!requeued && drop == dropClosed) {
		return true
	}
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				op := "failback.Store.Remove"
				if requeued {
					op = "failback.Store.Update"
				}
				err = recovered(op, r)
			}
		}()
		if requeued {
			err = st.Update(t.sid, int(t.attempts), f.at(t.due))
		} else {
			err = st.Remove(t.sid)
		}
	}()
	switch {
	case requeued && errors.Is(err, ErrLeaseLost):
		f.log.Warn("failback: store: another invoker took the call over (its lease ended): handing it over",
			zap.String("method", t.inv.Method), zap.Uint64("id", t.sid), zap.Error(err))
		return false
	case requeued && err != nil:
		f.log.Warn("failback: store: could not record a retry (the call may repeat attempts after a restart)",
			zap.String("method", t.inv.Method), zap.Uint64("id", t.sid), zap.Error(err))
	case err != nil:
		f.log.Warn("failback: store: could not remove an ended call (it will run again after a restart)",
			zap.String("method", t.inv.Method), zap.Uint64("id", t.sid), zap.Error(err))
	}
	if !requeued {
		t.sid = 0
	}
	return true
}

// end counts and reports the end of a task held by this worker.
func (f *Invoker) end(t *task, r result, now int64) {
	f.mu.Lock()
	f.inflight--
	switch r.out {
	case outSucceeded:
		f.succeeded++
	case outGaveUp:
		f.gaveUp++
	case outDropped:
		f.dropped[dropIndex(r.drop)]++
	}
	f.endLocked()
	f.mu.Unlock()
	switch r.out {
	case outSucceeded:
		f.recoveredReport(t, now)
	case outGaveUp:
		f.gaveUpReport(t, r.reason, r.err, now)
	case outDropped:
		f.droppedReport(t, r.drop, now)
	}
}
