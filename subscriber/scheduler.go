package subscriber

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rebound-go/rebound/internal/dueheap"
)

// timerKind says what a scheduler entry is for; the scheduler passes it
// back to its owner and does not read it.
type timerKind uint8

// timerOwner is what a scheduler entry belongs to. The scheduler calls
// onTimer with no lock held when e is due; gen is e's generation when it
// was popped: an entry moved or cancelled since (e.gen != gen, read under
// the owner's lock) is a stale firing to ignore.
type timerOwner interface {
	onTimer(e *entry, gen uint32, now time.Time)
}

// jobRunner runs one job the scheduler goroutine was given (enqueue).
type jobRunner interface {
	runJob(ctx context.Context, n int)
	flushJob() // hand the owner's noted events to its observers
}

// entry is one due time of one owner in the Manager's scheduler. Its
// fields are guarded by the scheduler's mutex; gen is written only with
// both the owner's lock and the scheduler's mutex held, so the owner may
// read it under its own.
type entry struct {
	owner timerOwner
	due   int64 // when it fires (scheduler.key: monotonic ns since the scheduler's start, on the grid, see fireAt)
	seq   uint64
	index int32 // in the heap; -1 when not queued
	gen   uint32
	kind  timerKind
}

// newEntry returns an unscheduled entry of kind for owner.
func newEntry(owner timerOwner, kind timerKind) entry {
	return entry{owner: owner, index: -1, kind: kind}
}

func (e *entry) Key() (int64, uint64) { return e.due, e.seq }
func (e *entry) SetIndex(i int32)     { e.index = i }

// timerSlack is the finest granularity of the Manager's scheduler: it
// wakes only on multiples of timerSlack (of the time since the Manager
// was created, on the monotonic clock), never early, so
// that due times close together share one wake-up. A longer wait gets a
// coarser grid: a due time d after now fires at the first multiple of g at
// or after it, where g is the largest of timerSlack, 2*timerSlack, ...,
// maxTimerSlack not above d/16. So an attempt, a hold's end or a
// confirmation cap comes at most about 1/16 of its wait (and never more
// than maxTimerSlack) after its exact time; full jitter moves it by up to
// 100%. A wait for a limiter token is on a grid no coarser than
// (burst-1)/rate of the limiter (exact below timerSlack), so that tokens
// reserved at different times are not sent together more at once than the
// limiter's burst.
//
// Why: waking a sleeping process costs far more CPU than the work done for
// one subscription. With 1,000 jittered subscriptions against a down
// registry, one wake-up per due time costs about as much as one timer
// goroutine per subscription (BenchmarkDownRegistry's timers-only
// baseline); on the grid the wake-ups per second are bounded by the grid,
// not by the number of subscriptions.
const (
	timerSlack    = 10 * time.Millisecond
	maxTimerSlack = 32 * timerSlack
)

// fireAt returns when the scheduler fires a due time: due rounded up to the
// grid for a wait of due-now (scheduler keys).
func fireAt(due, now int64) int64 { return fireWithin(due, now, int64(maxTimerSlack)) }

// fireWithin is fireAt on a grid no coarser than maxStep; below
// timerSlack, due itself (off the grid).
func fireWithin(due, now, maxStep int64) int64 {
	if maxStep < int64(timerSlack) {
		return due
	}
	wait := int64(0) // due-now, without overflow for a due time long past
	if due > now {
		wait = due - now
	}
	g := int64(timerSlack)
	for g < int64(maxTimerSlack) && 2*g <= maxStep && wait/16 >= 2*g {
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

// scheduler runs every due time of a Manager on one heap and one timer, in
// one goroutine: a subscription waiting for its next attempt, a limiter
// token, evidence or the end of a hold costs an entry in the heap, no
// goroutine and no timer of its own. It knows entries and jobs, not what
// they belong to (timerOwner, jobRunner).
//
// Lock order: an owner's lock, then the scheduler's. The scheduler
// goroutine calls timerOwner.onTimer with no lock held; a stale firing
// (the entry was moved or cancelled after it was popped) is recognised by
// its generation and ignored.
//
// Attempts the scheduler starts run on the scheduler goroutine itself, one
// after the other, so that a wake-up costs one goroutine and no hand-off
// to another processor. An attempt that blocks longer than timerSlack
// (a slow registry) is left to finish on its goroutine while a new
// scheduler goroutine takes over (a rescue timer, armed around every
// attempt, starts it), so a slow Registry call delays the other
// subscriptions by about timerSlack at most.
//
// Due times are kept on the monotonic clock, as durations since the
// scheduler's start (see key), never as wall-clock readings: a wall clock
// stepped back by NTP would otherwise delay every due time by the size of
// the step, and a due time beyond year 2262 (a period of centuries) would
// overflow UnixNano and fire at once.
type scheduler struct {
	epoch time.Time // time.Now() at creation, with its monotonic reading
	mu    sync.Mutex
	heap  dueheap.Heap[*entry]
	seq   uint64
	wait  dueheap.Wait // the timer of the scheduler goroutine (shared with failback's)
	jobs  []job        // attempts to run, from jhead
	jhead int

	wg   *sync.WaitGroup // the Manager's: scheduler goroutines are its goroutines
	done <-chan struct{}
	cur  atomic.Pointer[owner] // the goroutine acting as the scheduler
}

// owner is one scheduler goroutine.
type owner struct {
	busy   atomic.Bool // running an attempt
	rescue *time.Timer
}

// job is one attempt to run on the scheduler goroutine.
type job struct {
	r     jobRunner
	ctx   context.Context
	n     int
	flush bool // hand r's noted events to the observers (flushJob), not an attempt
}

func newScheduler(wg *sync.WaitGroup, done <-chan struct{}) *scheduler {
	return &scheduler{epoch: time.Now(), wait: dueheap.NewWait(), wg: wg, done: done}
}

// start runs the scheduler in a new goroutine, counted in wg.
func (sc *scheduler) start() {
	ow := &owner{}
	sc.cur.Store(ow)
	sc.wg.Add(1)
	go sc.run(ow)
}

// enqueue queues an attempt (or a flush of observer events); the
// scheduler goroutine runs it after the timers due now. It is called from
// the scheduler goroutine (onTimer), with the owner's lock held and an
// attempt added to the Manager's WaitGroup.
func (sc *scheduler) enqueue(j job) {
	sc.mu.Lock()
	sc.jobs = append(sc.jobs, j)
	sc.mu.Unlock()
}

func (sc *scheduler) popJob() (job, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.jhead == len(sc.jobs) {
		clear(sc.jobs)
		sc.jobs, sc.jhead = sc.jobs[:0], 0
		return job{}, false
	}
	j := sc.jobs[sc.jhead]
	sc.jobs[sc.jhead] = job{}
	sc.jhead++
	return j, true
}

// runJobs runs the queued attempts on ow's goroutine. It returns false if
// another goroutine took over meanwhile (ow must stop).
func (sc *scheduler) runJobs(ow *owner) bool {
	for {
		j, ok := sc.popJob()
		if !ok {
			return true
		}
		if ow.rescue == nil {
			ow.rescue = time.AfterFunc(timerSlack, func() { sc.takeOver(ow) })
		} else {
			ow.rescue.Reset(timerSlack)
		}
		ow.busy.Store(true)
		if j.flush {
			j.r.flushJob()
		} else {
			j.r.runJob(j.ctx, j.n)
		}
		ow.busy.Store(false)
		ow.rescue.Stop()
		if sc.cur.Load() != ow {
			return false
		}
	}
}

// takeOver starts a new scheduler goroutine if ow is still the scheduler
// and still stuck in an attempt.
func (sc *scheduler) takeOver(ow *owner) {
	if !ow.busy.Load() {
		return
	}
	next := &owner{}
	if sc.cur.CompareAndSwap(ow, next) {
		sc.wg.Add(1)
		go sc.run(next)
	}
}

// set (re)schedules e at due, replacing any earlier schedule. The caller
// holds e's owner's lock.
func (sc *scheduler) set(e *entry, due time.Time) {
	sc.setKey(e, fireAt(sc.key(due), sc.key(time.Now())))
}

// setWithin is set on a grid no coarser than maxStep (off the grid below
// timerSlack). It is for a limiter token's wait: the tokens reserved for
// times within one step of the grid are sent together at its end, and a
// limiter lets no more than its burst go at once. With a step of at most
// (burst-1)/rate, a tick sends fewer than burst of them, and a limiter
// that was in deficit (every token wait) has refilled that many since
// the last tick: the requests never outrun the limiter. On the full grid
// a tick could send rate x 320 ms of them at once.
// The caller holds e's owner's lock.
func (sc *scheduler) setWithin(e *entry, due time.Time, maxStep time.Duration) {
	sc.setKey(e, fireWithin(sc.key(due), sc.key(time.Now()), int64(maxStep)))
}

func (sc *scheduler) setKey(e *entry, d int64) {
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
	wake := sc.wait.Pushed(d)
	sc.mu.Unlock()
	if wake {
		sc.wait.Wake()
	}
}

// key returns t as a scheduler key: t.Sub(epoch) in nanoseconds. t and
// epoch both carry monotonic readings (times from time.Now and Add), so
// the key follows the monotonic clock whatever the wall clock does; Sub
// saturates, so a time centuries away is a key of math.MaxInt64 (never
// fires) instead of an overflow.
func (sc *scheduler) key(t time.Time) int64 { return int64(t.Sub(sc.epoch)) }

// cancel removes e from the schedule; a firing already under way is made
// stale. The caller holds e's owner's lock.
func (sc *scheduler) cancel(e *entry) {
	sc.mu.Lock()
	e.gen++
	if e.index >= 0 {
		heap.Remove(&sc.heap, int(e.index))
	}
	sc.mu.Unlock()
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

// run is a scheduler goroutine; it returns when done is closed or after
// another goroutine took over from it.
func (sc *scheduler) run(ow *owner) {
	defer sc.wg.Done()
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	var due []firing
	for {
		now := time.Now()
		limit := sc.key(now)
		due = due[:0]
		sc.mu.Lock()
		for len(sc.heap) > 0 && sc.heap[0].due <= limit {
			e := heap.Pop(&sc.heap).(*entry)
			due = append(due, firing{e, e.gen})
		}
		wait := time.Duration(-1)
		if len(due) == 0 {
			wait = dueheap.Armed(&sc.wait, sc.heap, limit)
		} else {
			sc.wait.Disarm() // more may be due: look again before sleeping
		}
		sc.mu.Unlock()

		for i, f := range due {
			f.e.owner.onTimer(f.e, f.gen, now)
			due[i] = firing{}
		}
		// Run the attempts just started, and any left behind by a
		// goroutine this one took over from.
		if !sc.runJobs(ow) {
			return
		}
		if len(due) > 0 {
			continue // look again: more may be due by now
		}
		if !sc.wait.Sleep(timer, wait, sc.done) {
			return
		}
	}
}
