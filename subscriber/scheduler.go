package subscriber

import (
	"container/heap"
	"math"
	"sync"
	"time"
)

// timerKind says what a scheduler entry of a subscription is for.
type timerKind uint8

const (
	timerRetry     timerKind = iota // the next attempt (after a backoff delay or for a limiter token)
	timerConfirm                    // the safety cap on a ReconnectConfirmer's evidence
	timerHold                       // the end of an empty-list hold
	timerReconcile                  // the next reconciliation or a Refresh lookup
	numTimers
)

// entry is one due time of one subscription in the Manager's scheduler.
// Its fields are guarded by the scheduler's mutex; gen is written only with
// both the subscription's and the scheduler's mutex held, so the
// subscription may read it under its own.
type entry struct {
	s     *Subscription
	due   int64 // when it fires (UnixNano, on the grid, see fireAt)
	seq   uint64
	index int32 // in the heap; -1 when not queued
	gen   uint32
	kind  timerKind
}

type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = int32(len(*h))
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n]
	old[n] = nil
	e.index = -1
	*h = old[:n]
	return e
}

// TimerSlack is the finest granularity of the Manager's scheduler: it
// wakes only on multiples of TimerSlack (of Unix time), never early, so
// that due times close together share one wake-up. A longer wait gets a
// coarser grid: a due time d after now fires at the first multiple of g at
// or after it, where g is the largest of TimerSlack, 2*TimerSlack, ...,
// MaxTimerSlack not above d/32. So an attempt, a limiter token, a hold's
// end or a confirmation cap comes at most about 3% of its wait (and never
// more than MaxTimerSlack) after its exact time.
//
// Why: waking a sleeping process costs far more CPU than the work done for
// one subscription. With 1,000 jittered subscriptions against a down
// registry, one wake-up per due time costs about as much as one timer
// goroutine per subscription; on the grid the wake-ups per second are
// bounded by the grid, not by the number of subscriptions.
const (
	TimerSlack    = 10 * time.Millisecond
	MaxTimerSlack = 32 * TimerSlack
)

// fireAt returns when the scheduler fires a due time: due rounded up to the
// grid for a wait of due-now (UnixNano).
func fireAt(due, now int64) int64 {
	g := int64(TimerSlack)
	for g < int64(MaxTimerSlack) && (due-now)/32 >= 2*g {
		g *= 2
	}
	if r := due % g; r != 0 {
		if due > math.MaxInt64-g {
			return math.MaxInt64
		}
		return due - r + g
	}
	return due
}

// scheduler runs every due time of every subscription of a Manager on one
// heap and one timer, in one goroutine: a subscription waiting for its
// next attempt, a limiter token, evidence or the end of a hold costs an
// entry in the heap, no goroutine and no timer of its own.
//
// Lock order: a subscription's mutex, then the scheduler's. The scheduler
// goroutine calls Subscription.onTimer with no lock held; a stale firing
// (the entry was moved or cancelled after it was popped) is recognised by
// its generation and ignored.
type scheduler struct {
	mu      sync.Mutex
	heap    entryHeap
	seq     uint64
	timerAt int64 // the tick the timer is set for (MaxInt64: none)
	wake    chan struct{}
}

func newScheduler() *scheduler {
	return &scheduler{timerAt: math.MaxInt64, wake: make(chan struct{}, 1)}
}

// set (re)schedules e at due, replacing any earlier schedule. The caller
// holds e.s.mu.
func (sc *scheduler) set(e *entry, due time.Time) {
	d := fireAt(due.UnixNano(), time.Now().UnixNano())
	sc.mu.Lock()
	e.gen++
	e.due = d
	sc.seq++
	e.seq = sc.seq
	if e.index >= 0 {
		heap.Fix(&sc.heap, int(e.index))
	} else {
		heap.Push(&sc.heap, e)
	}
	wake := d < sc.timerAt
	if wake {
		sc.timerAt = d
	}
	sc.mu.Unlock()
	if wake {
		select {
		case sc.wake <- struct{}{}:
		default:
		}
	}
}

// cancel removes e from the schedule; a firing already under way is made
// stale. The caller holds e.s.mu.
func (sc *scheduler) cancel(e *entry) {
	sc.mu.Lock()
	e.gen++
	if e.index >= 0 {
		heap.Remove(&sc.heap, int(e.index))
	}
	sc.mu.Unlock()
}

// queued reports whether e is scheduled. The caller holds e.s.mu.
func (sc *scheduler) queued(e *entry) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return e.index >= 0
}

// len returns the number of scheduled entries.
func (sc *scheduler) len() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.heap)
}

type firing struct {
	e   *entry
	gen uint32
}

// run is the scheduler goroutine; it returns when done is closed.
func (sc *scheduler) run(done <-chan struct{}) {
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	var due []firing
	for {
		now := time.Now()
		limit := now.UnixNano()
		due = due[:0]
		sc.mu.Lock()
		for len(sc.heap) > 0 && sc.heap[0].due <= limit {
			e := heap.Pop(&sc.heap).(*entry)
			due = append(due, firing{e, e.gen})
		}
		wait := time.Duration(-1)
		sc.timerAt = math.MaxInt64
		if len(sc.heap) > 0 && len(due) == 0 {
			sc.timerAt = sc.heap[0].due
			wait = time.Duration(sc.timerAt - limit)
		}
		sc.mu.Unlock()

		if len(due) > 0 {
			for i, f := range due {
				f.e.s.onTimer(f.e, f.gen, now)
				due[i] = firing{}
			}
			continue // look again: more may be due by now
		}
		if wait < 0 {
			select {
			case <-sc.wake:
			case <-done:
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-sc.wake:
		case <-done:
			return
		}
	}
}
