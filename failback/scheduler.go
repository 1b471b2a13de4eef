package failback

import (
	"container/heap"
	"context"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/cluster"
)

// task is one call waiting for, or running, a retry. It is owned by
// whichever structure holds it: the heap or the ready queue (under f.mu),
// or the worker running it.
type task struct {
	inv      *cluster.Invocation
	values   context.Context // WithContextValues: the caller's values, no cancel
	bo       backoff.BackOff
	failed   []cluster.Invoker // invokers that failed for this task
	lastErr  error
	due      int64 // nanoseconds since f.epoch
	born     int64 // first failure, nanoseconds since f.epoch
	seq      uint64
	attempts int32
	index    int32 // position in the heap
}

func (t *task) target() string {
	if len(t.failed) == 0 {
		return ""
	}
	return t.failed[len(t.failed)-1].Target()
}

// taskHeap is a min-heap of tasks by due time, then by seq (FIFO among equal
// due times), for container/heap.
type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = int32(len(*h))
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	n := len(old) - 1
	t := old[n]
	old[n] = nil
	t.index = -1
	*h = old[:n]
	return t
}

// pushLocked puts t in the heap and wakes the scheduler if t is due before
// the time its timer is set for.
func (f *Invoker) pushLocked(t *task) {
	heap.Push(&f.heap, t)
	if t.due < f.timerAt {
		f.timerAt = t.due
		select {
		case f.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (f *Invoker) popReadyLocked() *task {
	t := f.ready[f.readyHead]
	f.ready[f.readyHead] = nil
	f.readyHead++
	if f.readyHead == len(f.ready) {
		f.ready, f.readyHead = f.ready[:0], 0
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
		if f.closed {
			f.mu.Unlock()
			return
		}
		now := f.now()
		moved := 0
		for len(f.heap) > 0 && f.heap[0].due <= now {
			f.ready = append(f.ready, heap.Pop(&f.heap).(*task))
			moved++
		}
		wait := time.Duration(-1)
		f.timerAt = math.MaxInt64
		if len(f.heap) > 0 {
			f.timerAt = f.heap[0].due
			wait = time.Duration(f.timerAt - now)
		}
		f.mu.Unlock()

		for i := 0; i < moved && i < f.cfg.concurrency; i++ {
			f.cond.Signal()
		}
		if wait < 0 {
			select {
			case <-f.wake:
			case <-f.done:
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-f.wake:
		case <-f.done:
			return
		}
	}
}

// work is a retry worker: it runs ready tasks one at a time.
func (f *Invoker) work() {
	defer f.exit()
	for {
		f.mu.Lock()
		for f.readyHead == len(f.ready) && !f.closed {
			f.cond.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			return
		}
		t := f.popReadyLocked()
		f.inflight++
		f.retried++
		f.mu.Unlock()
		f.run(t)
	}
}

type outcome int

const (
	outSucceeded outcome = iota
	outRequeued
	outGaveUp
	outDropped
)

// run makes one retry attempt of t and files the task by its outcome.
func (f *Invoker) run(t *task) {
	t.attempts++
	ctx, cancel, stop := f.attemptContext(t)
	target, _, err := f.attempt(ctx, t.inv, t.failed)
	if stop != nil {
		stop()
	}
	cancel()

	now := f.now()
	var (
		out    outcome
		delay  time.Duration
		reason error
	)
	switch {
	case err == nil:
		out = outSucceeded
	default:
		t.lastErr = err
		if target != nil {
			t.addFailed(target)
		}
		switch {
		case f.baseCtx.Err() != nil: // cancelled by Close
			out = outDropped
		case !f.retryable(err):
			out, reason = outGaveUp, ErrNotRetryable
		case int(t.attempts) > f.cfg.retries:
			out, reason = outGaveUp, ErrRetriesExhausted
		default:
			if delay, reason = f.nextDelay(t, now); reason != nil {
				out = outGaveUp
			} else {
				out = outRequeued
				t.due = satAdd(now, delay)
			}
		}
	}

	f.mu.Lock()
	f.inflight--
	if out != outSucceeded && f.closed {
		out = outDropped
	}
	switch out {
	case outSucceeded:
		f.succeeded++
	case outRequeued:
		f.pushLocked(t)
	case outGaveUp:
		f.gaveUp++
	case outDropped:
		f.droppedClosed++
	}
	f.mu.Unlock()

	switch out {
	case outSucceeded:
		if ce := f.log.Check(zapcore.DebugLevel, "failback: retry succeeded"); ce != nil {
			ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
				zap.String("target", targetOf(target)), zap.Duration("age", time.Duration(now-t.born)))
		}
		if h := f.cfg.hooks.Succeeded; h != nil {
			info := f.info(t, nil, 0, now)
			info.Target = targetOf(target)
			h(info)
		}
	case outRequeued:
		if ce := f.log.Check(zapcore.DebugLevel, "failback: retry failed"); ce != nil {
			ce.Write(zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
				zap.String("target", targetOf(target)), zap.Duration("delay", delay), zap.Error(err))
		}
		if h := f.cfg.hooks.Retried; h != nil {
			info := f.info(t, err, delay, now)
			info.Target = targetOf(target)
			h(info)
		}
	case outGaveUp:
		gerr := &GiveUpError{Attempts: int(t.attempts), Reason: reason, Last: err}
		if ce := f.log.Check(zapcore.WarnLevel, "failback: gave up on call"); ce != nil {
			ce.Write(zap.String("method", t.inv.Method),
				zap.Int("attempts", int(t.attempts)), zap.String("target", targetOf(target)),
				zap.Duration("age", time.Duration(now-t.born)), zap.NamedError("reason", reason), zap.Error(err))
		}
		if h := f.cfg.hooks.GaveUp; h != nil {
			info := f.info(t, gerr, 0, now)
			info.Target = targetOf(target)
			h(info)
		}
	case outDropped:
		f.dropped(t, DropClosed)
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
// WithContextValues. stop, if not nil, must be called before cancel.
func (f *Invoker) attemptContext(t *task) (ctx context.Context, cancel context.CancelFunc, stop func() bool) {
	parent := f.baseCtx
	if t.values != nil {
		parent = t.values
	}
	if d := f.cfg.attemptTimeout; d > 0 {
		ctx, cancel = context.WithTimeout(parent, d)
	} else {
		ctx, cancel = context.WithCancel(parent)
	}
	if t.values != nil {
		stop = context.AfterFunc(f.baseCtx, cancel)
	}
	return ctx, cancel, stop
}
