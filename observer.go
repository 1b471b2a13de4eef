package rebound

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/internal/nilness"
)

// EventKind says what happened.
// One enumeration serves every source of events in rebound.
// docs/observability.md lists each source's kinds and Detail types.
type EventKind uint8

const (
	// EventRetry: an attempt failed and the next is due after Delay.
	EventRetry EventKind = iota + 1
	// EventGiveUp: the work ended with the error Err.
	EventGiveUp
	// EventAttempt: an attempt ended; Err is its outcome (nil: success).
	EventAttempt
	// EventRecovered: an attempt succeeded after at least one failure.
	EventRecovered
	// EventThrottled: a due attempt was refused locally; Err is the refusal.
	EventThrottled
	// EventQueued: failback queued a call whose first attempt failed.
	EventQueued
	// EventDropped: failback stopped retrying a call for an outside reason.
	EventDropped
	// EventStateChanged: a subscription, Registration or breaker changed state.
	EventStateChanged
	// EventDelivered: a subscription handled a list from the adapter.
	EventDelivered
	// EventConfirmed: evidence that the registry holds a subscription.
	EventConfirmed
	// EventConnection: a Manager's connection to its registry changed.
	EventConnection
)

func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give-up"
	case EventAttempt:
		return "attempt"
	case EventRecovered:
		return "recovered"
	case EventThrottled:
		return "throttled"
	case EventQueued:
		return "queued"
	case EventDropped:
		return "dropped"
	case EventStateChanged:
		return "state-changed"
	case EventDelivered:
		return "delivered"
	case EventConfirmed:
		return "confirmed"
	case EventConnection:
		return "connection"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one thing that happened, named by Kind.
// It is passed by value; a retry loop's events cost no allocation.
type Event struct {
	Kind EventKind
	// Waiting marks an EventGiveUp that ends no attempt (counters skip it).
	Waiting bool
	// Attempt is the number of attempts so far, 1 for the first.
	Attempt int
	// Err is the attempt's error, the final error, or a change's reason.
	// It is nil for a success and for EventRecovered.
	Err error
	// Delay is the wait before the next attempt, without limiter wait.
	Delay time.Duration
	// LimiterWait is the time an attempt waited for a limiter token.
	LimiterWait time.Duration
	// Elapsed is the time since the work began, never below 0.
	Elapsed time.Duration
	// Detail is the source's own record, nil for retry loops.
	Detail any
}

// Observer receives events; every WithObserver takes one.
// Observe runs synchronously, in order, never under a lock.
// A Queue moves a slow one off.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// observerOption is WithObserver's option: o's listeners, and o for the
// layers that deliver events of their own (internal/admit.Engine).
type observerOption struct {
	l listeners
	o Observer
}

// defaultQueueCapacity is the capacity NewQueue uses for 0.
const defaultQueueCapacity = 4096

// Queue is an Observer that hands events, in order, to another on its own goroutine.
// Observe never blocks; a full queue drops and counts new events.
// A panic in the observer is recovered and logged.
// It is safe for concurrent use; Shutdown or Close stops it.
type Queue struct {
	o       Observer
	log     *zap.Logger
	cap     int
	mu      sync.Mutex
	buf     []Event
	head    int
	closing bool
	discard bool // Close: drop what is queued
	overrun bool // dropped since the queue was last empty (one warning per episode)
	signal  chan struct{}
	stop    chan struct{} // closed when closing is set
	once    sync.Once
	done    chan struct{}
	gid     atomic.Uint64 // the queue goroutine's id
	dropped atomic.Uint64
}

// NewQueue starts a Queue in front of o holding up to capacity events (0: 4096).
// log gets overrun warnings and panics (nil: none).
// o must not be nil; capacity must not be negative.
func NewQueue(o Observer, capacity int, log *zap.Logger) (*Queue, error) {
	if nilness.Is(o) {
		return nil, &ArgumentError{Func: "rebound.NewQueue", Arg: "o", Reason: "must not be nil"}
	}
	if capacity < 0 {
		return nil, &ArgumentError{Func: "rebound.NewQueue", Arg: "capacity", Reason: "must not be negative"}
	}
	if capacity == 0 {
		capacity = defaultQueueCapacity
	}
	if log == nil {
		log = zap.NewNop()
	}
	q := &Queue{o: o, log: log, cap: capacity, signal: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q, nil
}

// Observe queues e; it never blocks.
func (q *Queue) Observe(e Event) {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return
	}
	if len(q.buf)-q.head >= q.cap {
		warn := !q.overrun
		q.overrun = true
		q.mu.Unlock()
		q.dropped.Add(1)
		if warn {
			q.log.Warn("rebound: observer queue full: dropping events (the observer is too slow)", zap.Int("capacity", q.cap))
		}
		return
	}
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		// Full backing array with delivered events in front: move the
		// waiting ones down rather than grow it (a queue that never
		// empties would otherwise keep every event it ever held).
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Dropped returns the number of events dropped because the queue was full.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// len returns the number of events waiting.
func (q *Queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf) - q.head
}

// Shutdown stops the Queue once the events queued so far are delivered.
// If ctx ends first, it drops the rest and returns an error wrapping ctx.Err().
// From the observer itself, it returns ErrCalledFromCallback at once.
func (q *Queue) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Queue.Shutdown", Arg: "ctx", Reason: "is nil"}
	}
	q.begin(false)
	if goid.ID() == q.gid.Load() {
		return ErrCalledFromCallback
	}
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		q.begin(true)
		<-q.done
		return fmt.Errorf("rebound: Queue.Shutdown: %w", ctx.Err())
	}
}

// Close stops the Queue, dropping queued events, and waits for the one being delivered.
// It is idempotent; from the observer it returns ErrCalledFromCallback.
func (q *Queue) Close() error {
	q.begin(true)
	if goid.ID() == q.gid.Load() {
		return ErrCalledFromCallback
	}
	<-q.done
	return nil
}

func (q *Queue) begin(discard bool) {
	q.mu.Lock()
	q.closing = true
	if discard {
		q.discard = true
	}
	q.mu.Unlock()
	q.once.Do(func() { close(q.stop) })
}

func (q *Queue) run() {
	defer close(q.done)
	q.gid.Store(goid.ID())
	for {
		q.mu.Lock()
		if q.discard || q.head == len(q.buf) {
			q.buf, q.head = q.buf[:0], 0
			q.overrun = false // caught up: an overrun episode is over
			if q.closing {
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			select {
			case <-q.signal:
			case <-q.stop:
			}
			continue
		}
		e := q.buf[q.head]
		q.buf[q.head] = Event{}
		q.head++
		q.mu.Unlock()
		q.deliver(e)
	}
}

func (q *Queue) deliver(e Event) {
	defer func() {
		if r := recover(); r != nil {
			q.log.Error("rebound: observer panicked", zap.Stringer("kind", e.Kind), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	q.o.Observe(e)
}

// numLoopKinds bounds the kinds of events a retry loop emits (EventRetry
// to EventThrottled), as an index of per-kind tables.
const numLoopKinds = EventThrottled + 1

// listeners is the function each kind of a retry loop's events calls, nil
// for a kind nobody listens to: one WithObserver observer or the meter,
// made once when the option is made.
type listeners [numLoopKinds]func(Event)

// listenersOf returns the functions that deliver each kind to o: an
// ObserverFunc as such, another Observer's method value.
func listenersOf(o Observer) *listeners {
	l := &listeners{}
	switch v := o.(type) {
	case ObserverFunc:
		for k := EventRetry; k < numLoopKinds; k++ {
			l[k] = v
		}
	default:
		f := o.Observe
		for k := EventRetry; k < numLoopKinds; k++ {
			l[k] = f
		}
	}
	return l
}
