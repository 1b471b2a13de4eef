package failback

import (
	"container/heap"
	"context"
	"math"
	"time"

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
	attempts   int32  // the attempts made, as the Schedule counts them (see counted)
	index      int32  // position in the heap
	sid        uint64 // ID in the Store (WithStore); 0 if none
	ended      int64  // end of the last traced attempt (a tracer in WithPolicy); 0 if none
}

// counted is the count of attempts a Decision gives (Attempt: the failed
// attempts of the run, refusals included, or the count a Store restored),
// as a task keeps it. While an attempt the Schedule has not been told
// about yet is under way or has just ended, a task counts it too (+1).
// The count is the Schedule's, never kept apart.
func counted(n int) int32 { return int32(min(n, math.MaxInt32-1)) }

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
