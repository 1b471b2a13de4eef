package failback

import (
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/goid"
)

// Task is the Detail of every rebound.Event the invoker emits; it is a copy.
// A queued call emits EventQueued, an EventRetry per failed retry, then
// EventRecovered, EventGiveUp or EventDropped. A call not queued emits only
// EventDropped. One call's events come in order, with no lock held.
type Task struct {
	Invocation *cluster.Invocation // the call, as given to Invoke (read only)
	Attempts   int                 // attempts made, the first and throttled ones included
	Target     string              // the last attempt's invoker ("" if none)
	// Err is the last attempt's error: a *rebound.RetryError in EventGiveUp
	// (Reason rebound.ErrExhausted, or one saying the error is not
	// retryable; Last a *cluster.PanicError after a panic), nil in
	// EventRecovered.
	Err    error
	Delay  time.Duration // the wait before the next attempt
	Age    time.Duration // the time since the first attempt failed
	Reason error         // why it was dropped: ErrQueueFull, ErrClosed, ErrExpired, ErrStore or rebound.ErrBudgetExhausted
}

// Stats counts the calls handed to the background: first attempts that
// failed with a retryable error, and calls loaded from a Store. Always:
//
//	Offered == Queued + InFlight + Succeeded + GaveUp + sum(Dropped)
type Stats struct {
	Queued       int              // waiting now, for their due time or a worker
	InFlight     int              // held by a retry worker now
	Offered      uint64           // handed to the background
	Retried      uint64           // retry attempts started
	Throttled    uint64           // retries the throttle rejected: failed, not sent
	BreakerWaits uint64           // retries that waited for a breaker: not sent, not attempts
	Succeeded    uint64           // succeeded on a retry
	GaveUp       uint64           // gave up (EventGiveUp)
	Dropped      map[error]uint64 // dropped, by Task.Reason; an entry for every reason
	Quarantined  uint64           // stored calls set aside (WithQuarantine)
}

// Stats returns the current counters.
func (f *Invoker) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{
		Queued:      f.queuedLocked(),
		InFlight:    f.inflight,
		Offered:     f.offered,
		Retried:     f.retried,
		Throttled:   f.throttledN,
		Quarantined: f.quarantined,
		Succeeded:   f.succeeded,
		GaveUp:      f.gaveUp,
		Dropped:     make(map[error]uint64, len(dropReasons)),
	}
	for i, r := range dropReasons {
		s.Dropped[r.sentinel()] = f.dropped[i]
	}
	s.BreakerWaits = f.breakerWaits
	return s
}

func dropIndex(r dropReason) int {
	for i, x := range dropReasons {
		if x == r {
			return i
		}
	}
	panic("failback: unknown dropReason " + string(r))
}

// enterHook marks the calling goroutine as running a hook until the
// returned function is called (nested hook calls on one goroutine, such as
// a hook calling Invoke, keep the outer mark).
func (f *Invoker) enterHook() func() {
	id := goid.ID()
	if _, nested := f.inHook.LoadOrStore(id, struct{}{}); nested {
		return func() {}
	}
	return func() { f.inHook.Delete(id) }
}

// inHookNow reports whether the calling goroutine is running a hook.
func (f *Invoker) inHookNow() bool {
	_, ok := f.inHook.Load(goid.ID())
	return ok
}

func (f *Invoker) observed() bool { return len(f.cfg.observers) > 0 }

// emit hands an event about t (a Task, with err, delay, the age at now
// and the drop reason) to every observer, recovering a panic (returned,
// the first one, and logged at Error).
func (f *Invoker) emit(kind rebound.EventKind, t *task, err error, delay time.Duration, now int64, reason error) (pe *cluster.PanicError) {
	defer f.enterHook()()
	info := Task{Invocation: t.inv, Attempts: int(t.attempts), Target: t.lastTarget, Err: err,
		Delay: delay, Age: time.Duration(now - t.born), Reason: reason}
	e := rebound.Event{Kind: kind, Attempt: info.Attempts, Err: err, Delay: delay, Elapsed: info.Age, Detail: info}
	for _, o := range f.cfg.observers {
		if p := f.observe(o, e); p != nil && pe == nil {
			pe = p
		}
	}
	return pe
}

func (f *Invoker) observe(o rebound.Observer, e rebound.Event) (pe *cluster.PanicError) {
	defer func() {
		if r := recover(); r != nil {
			pe = &cluster.PanicError{Op: "failback observer (" + e.Kind.String() + ")", Value: r, Stack: debug.Stack()}
			f.logPanic(pe, e.Detail.(Task).Invocation)
		}
	}()
	o.Observe(e)
	return nil
}

func (f *Invoker) logPanic(pe *cluster.PanicError, inv *cluster.Invocation) {
	f.log.Error("failback: recovered a panic", zap.String("op", pe.Op), zap.String("method", inv.Method),
		zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
}

// retryReport reports a failed retry of t (or one not sent) that is
// requeued for delay: a Debug line msg, then EventRetry. It returns the
// panic of an observer, if any.
func (f *Invoker) retryReport(t *task, msg string, delay time.Duration, err error, now int64) *cluster.PanicError {
	if ce := f.log.Check(zapcore.DebugLevel, msg); ce != nil {
		ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
			zap.String("target", t.lastTarget), zap.Duration("delay", delay), zap.Error(err))
	}
	if f.observed() {
		return f.emit(rebound.EventRetry, t, err, delay, now, nil)
	}
	return nil
}

// recoveredReport reports a task whose retry succeeded.
func (f *Invoker) recoveredReport(t *task, now int64) {
	if ce := f.log.Check(zapcore.DebugLevel, "failback: retry succeeded"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
			zap.String("target", t.lastTarget), zap.Duration("age", time.Duration(now-t.born)))
	}
	if f.observed() {
		_ = f.emit(rebound.EventRecovered, t, nil, 0, now, nil)
	}
}

// droppedReport reports a task that was accepted as dropped.
func (f *Invoker) droppedReport(t *task, reason dropReason, now int64) {
	if ce := f.log.Check(zapcore.WarnLevel, "failback: dropped queued call"); ce != nil {
		ce.Write(zap.String("reason", string(reason)),
			zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
			zap.String("target", t.lastTarget), zap.Duration("age", time.Duration(now-t.born)), zap.Error(t.lastErr))
	}
	if f.observed() {
		_ = f.emit(rebound.EventDropped, t, t.lastErr, 0, now, reason.sentinel())
	}
}

// gaveUpReport reports a task that gave up.
func (f *Invoker) gaveUpReport(t *task, reason, last error, now int64) {
	gerr := &rebound.RetryError{Attempts: int(t.attempts), Reason: reason, Last: last}
	if ce := f.log.Check(zapcore.WarnLevel, "failback: gave up on call"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method),
			zap.Int("attempts", int(t.attempts)), zap.String("target", t.lastTarget),
			zap.Duration("age", time.Duration(now-t.born)), zap.NamedError("reason", reason), zap.Error(last))
	}
	if f.observed() {
		_ = f.emit(rebound.EventGiveUp, t, gerr, 0, now, nil)
	}
}
