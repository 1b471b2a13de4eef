package failback

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/dueheap"
)

// task is one call waiting for, or running, a retry. It is owned by
// whichever holds it: the goroutine queueing it (until it is pushed), the
// heap or the ready queue (under f.mu), or the worker running it. Only its
// owner reads or writes it; hooks get a copy (Task) made by the owner.
type task struct {
	inv        *cluster.Invocation
	values     context.Context   // WithContextValues: the caller's values, no cancel
	sched      *rebound.Schedule // the task's retry schedule (owner only)
	att        rebound.Attempt   // the attempt its Schedule admitted last
	failed     []cluster.Invoker // invokers that failed for this task
	lastErr    error
	lastTarget string // Target of the last attempt's invoker; "" if none
	due        int64  // nanoseconds since f.epoch
	born       int64  // first failure, nanoseconds since f.epoch
	expires    int64  // end of the TTL; MaxInt64 if none
	seq        uint64
	attempts   int32  // the attempts made, as the Schedule counts them (see made)
	index      int32  // position in the heap
	sid        uint64 // ID in the Store (WithStore); 0 if none
	ended      int64  // end of the last traced attempt (a tracer in WithPolicy); 0 if none
}

func (t *task) target() string { return t.lastTarget }

// made records t's attempts as its Schedule counts them (the failed
// attempts of the run, refusals included, or the count a Store restored),
// plus running: 1 while an attempt the Schedule has not been told about
// yet is under way or has just ended (its success, or a failure that ends
// the task without a retry). The count is the Schedule's, never kept here.
func (t *task) made(running int32) {
	t.attempts = int32(min(admit.Attempts(t.sched), math.MaxInt32-1)) + running
}

// Key and SetIndex make a task an element of the due-time heap (dueheap).
func (t *task) Key() (int64, uint64) { return t.due, t.seq }
func (t *task) SetIndex(i int32)     { t.index = i }

// pushLocked puts t in the heap and wakes the scheduler if t is due before
// the time its timer is set for.
func (f *Invoker) pushLocked(t *task) {
	heap.Push(&f.heap, t)
	if f.wait.Pushed(t.due) {
		f.wait.Wake()
	}
}

// popReadyLocked takes the oldest ready task. The queue is compacted once
// its consumed head is at least half of it, so that its backing array
// stays within a small multiple of the live tasks (at most the task limit)
// under a sustained backlog, at amortised O(1) per task.
func (f *Invoker) popReadyLocked() *task {
	t := f.ready[f.readyHead]
	f.ready[f.readyHead] = nil
	f.readyHead++
	switch {
	case f.readyHead == len(f.ready):
		f.ready, f.readyHead = f.ready[:0], 0
	case f.readyHead >= 16 && 2*f.readyHead >= len(f.ready):
		n := copy(f.ready, f.ready[f.readyHead:])
		clear(f.ready[n:])
		f.ready, f.readyHead = f.ready[:n], 0
	}
	return t
}

// exit is deferred by every goroutine New starts.
func (f *Invoker) exit() {
	if f.live.Add(-1) == 0 {
		close(f.stopped)
	}
}

// schedule is the scheduler goroutine: it sleeps on one timer set to the
// earliest due time, moves due tasks to the ready queue and wakes workers.
// It never scans tasks that are not due.
func (f *Invoker) schedule() {
	defer f.exit()
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	for {
		f.mu.Lock()
		if f.state == stateClosed {
			f.mu.Unlock()
			return
		}
		now := f.now()
		moved := 0
		for len(f.heap) > 0 && f.heap[0].due <= now {
			f.ready = append(f.ready, heap.Pop(&f.heap).(*task))
			moved++
		}
		wait := dueheap.Armed(&f.wait, f.heap, now)
		f.mu.Unlock()

		for i := 0; i < moved && i < f.cfg.concurrency; i++ {
			f.cond.Signal()
		}
		if !f.wait.Sleep(timer, wait, f.done) {
			return
		}
	}
}

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
		// worker counts. (So does MaxElapsed: the engine's Ready stops a
		// retry that comes due after it.)
		expired := now > t.expires
		f.mu.Unlock()
		switch {
		case expired:
			f.finish(t, outDropped, dropExpired, nil, nil, now)
		case !f.admitted(t, now):
			// refused locally: rescheduled, dropped or ended without an attempt
		default:
			f.run(t)
		}
	}
}

type outcome int

const (
	outSucceeded outcome = iota
	outRequeued
	outGaveUp
	outDropped
)

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

// run makes one retry attempt of t (held by this worker, counted in
// inflight) and files the task by its outcome. If the selected target is
// at its concurrency bound, the task is parked for it instead, without an
// attempt, and goes back to the ready queue when an attempt on that target
// ends (or, if none is parked for that target, when any attempt ends).
func (f *Invoker) run(t *task) {
	ctx, release := f.attemptContext(t)
	target, pe, err := f.safeSelect(ctx, t)
	if target == nil && pe == nil && f.breakerHold(t, err, false) {
		release()
		return
	}
	tg := targetOf(target)
	if !f.begin(t, target, tg) {
		release()
		return
	}
	t.made(1) // the attempt about to be sent counts from now on
	var span trace.Span
	if f.cfg.tracer != nil {
		ctx, span = f.startRetry(ctx, t) // trace.go
	}
	if target != nil {
		pe, err = safeInvoke(ctx, target, t.inv)
		f.endedOn(tg)
	}
	release()
	if target != nil && pe == nil && err != nil && f.breakerHold(t, err, true) {
		if span != nil {
			f.endRetry(span, outRequeued, err) // held for the breaker: t is no longer this worker's
		}
		return
	}
	t.lastTarget = tg

	now := f.now()
	var (
		out    = outSucceeded
		drop   dropReason
		delay  time.Duration
		reason error
	)
	if pe != nil {
		f.logPanic(pe, t.inv)
		out, reason = outGaveUp, errPanicked
	} else if err == nil {
		t.att.Done(nil, f.at(now)) // an accept for the throttle
	} else {
		t.lastErr = err
		if target != nil {
			t.addFailed(target)
		}
		closing := f.baseCtx.Err() != nil
		switch {
		case isStopping(err):
			out, drop = outDropped, dropClosed // the transport is stopping: kept for the next process
		case closing && errors.Is(err, context.Canceled):
			out, drop = outDropped, dropClosed // cancelled by Close: not the call's own outcome
		case !f.retryable(err):
			out, reason = outGaveUp, ErrNotRetryable
			// Not retried: the engine hears of it as a permanent failure
			// (the provider answered: an accept for the throttle).
			t.att.Done(rebound.Permanent(err), f.at(now))
		default:
			if delay, reason = f.nextDelay(t, now); reason != nil {
				out = outGaveUp
			} else if due := satAdd(now, delay); due > t.expires {
				out, drop = outDropped, dropExpired
			} else if closing {
				out, drop = outDropped, dropClosed // would retry, but Close began
			} else {
				out = outRequeued
				t.due = due
			}
		}
	}
	if span != nil {
		t.ended = now
		f.endRetry(span, out, err)
	}
	f.settle(t, out, drop, delay, reason, err, now, "failback: retry failed")
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

// admitted asks t's Schedule whether t's retry, due now, may be sent
// (Admit: a retry): the budget (rebound.WithBudget, under
// admit.Drop) and the throttle (rebound.WithThrottle, under
// admit.Defer) admit it, each once per attempt. It reports whether
// the retry may be sent; if not, t is no longer this worker's:
//
//   - the budget refused it (Stop, Reason ErrBudgetExhausted,
//     under admit.Drop): dropped with dropBudget;
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
func (f *Invoker) admitted(t *task, now int64) bool {
	att, dec := t.sched.Admit(f.at(now))
	switch {
	case !dec.Stop && dec.Delay == 0: // admitted
		t.att = att
		return true
	case dec.Stop:
		if errors.Is(dec.Reason, rebound.ErrBudgetExhausted) { // a refusal under admit.Drop (retriers)
			f.finish(t, outDropped, dropBudget, nil, nil, now)
			return false
		}
		if dec.Reason == nil { // not a refusal: the retry came due after MaxElapsed
			f.finish(t, outGaveUp, "", stopReason(dec.Err), t.lastErr, now)
			return false
		}
	}
	t.made(0) // the Schedule counted the refused attempt
	t.lastErr = rebound.ErrThrottled
	f.mu.Lock()
	f.throttledN++
	f.mu.Unlock()
	var (
		out    = outRequeued
		drop   dropReason
		reason error
		d      = dec.Delay
	)
	switch due := satAdd(now, d); {
	case dec.Stop:
		out, reason = outGaveUp, stopReason(dec.Err)
	case due > t.expires:
		out, drop = outDropped, dropExpired
	case f.baseCtx.Err() != nil:
		out, drop = outDropped, dropClosed // would retry, but Close began
	default:
		t.due = due
	}
	f.settle(t, out, drop, d, reason, rebound.ErrThrottled, now, "failback: retry rejected locally by the throttle")
	return false
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
				zap.String("target", t.target()), zap.Duration("delay", delay), zap.Error(err))
		}
		if f.observed() {
			if pe := f.emit(rebound.EventRetry, f.info(t, err, delay, now)); pe != nil {
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
				zap.String("target", t.target()), zap.Duration("age", time.Duration(now-t.born)))
		}
		if f.observed() {
			_ = f.emit(rebound.EventRecovered, f.info(t, nil, 0, now))
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

// addFailed records iv as failed for t (once per Target).
func (t *task) addFailed(iv cluster.Invoker) {
	tg := iv.Target()
	for _, e := range t.failed {
		if e.Target() == tg {
			return
		}
	}
	t.failed = append(t.failed, iv)
}

// attemptContext returns the context of one retry attempt: cancelled by
// Close, bounded by the attempt timeout, with the caller's values under
// WithContextValues. release frees it.
func (f *Invoker) attemptContext(t *task) (ctx context.Context, release func()) {
	parent := f.baseCtx
	if t.values != nil {
		parent = t.values
	}
	var cancel context.CancelFunc
	if d := f.cfg.attemptTimeout; d > 0 {
		ctx, cancel = context.WithTimeout(parent, d)
	} else {
		ctx, cancel = context.WithCancel(parent)
	}
	if t.values == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(f.baseCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// retriers compiles the engine's settings: retrier makes the tasks'
// Schedules; acct (with a budget or a throttle) counts first attempts.
// No classifier: the Schedule is only asked about errors failback has
// classified as retryable already; accepts of the others are given to the
// throttle by accepted.
func (c *config) retriers() (retrier, acct *rebound.Retrier, err error) {
	// The user's observers, meter and tracer are failback's own (Unobserved):
	// the Schedules emit no events of theirs.
	ropts := append(c.limits[:len(c.limits):len(c.limits)], admit.Unobserved().(rebound.Option))
	if c.seeded {
		ropts = append(ropts, admit.Seed(c.seed).(rebound.Option))
	}
	if c.budget {
		// A retry the budget refuses is dropped (dropBudget), when it is
		// due; applied after the user's options, so none changes it.
		ropts = append(ropts, admit.Refuse(admit.Budget, admit.Drop).(rebound.Option))
	}
	if c.budget || c.throttle {
		if acct, err = rebound.NewRetrier(c.policy, ropts...); err != nil {
			return nil, nil, err
		}
	}
	// A task's Schedule starts with the first attempt Invoke made: its
	// budget deposit and throttle request are acct's, so the Schedule's
	// first admission asks no gate.
	ropts = append(ropts, c.retryMetrics(), admit.First(0).(rebound.Option))
	retrier, err = rebound.NewRetrier(c.policy, ropts...)
	return retrier, acct, err
}
