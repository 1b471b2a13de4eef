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
// Each kind's doc names its sources and the Detail they attach.
type EventKind uint8

const (
	// EventRetry: an attempt failed and the next is due after Delay.
	// Sources: retry loops; failback (Detail a failback.Task).
	EventRetry EventKind = iota + 1
	// EventGiveUp: the work ended with the error Err.
	// Sources: retry loops; failback (Detail a failback.Task, Err a *RetryError).
	EventGiveUp
	// EventAttempt: an attempt ended, Err its outcome (nil: success).
	// Sources: retry loops; Registrations (Detail a subscriber.RegistrationEvent).
	EventAttempt
	// EventRecovered: an attempt succeeded after at least one failure.
	// Sources: retry loops; failback (Detail a failback.Task).
	EventRecovered
	// EventThrottled: a due attempt was refused locally and not sent.
	// Err is the refusal; Delay the wait before the next try, or 0.
	// Sources: retry loops; subscriptions (Detail a subscriber.SubscriptionEvent).
	EventThrottled
	// EventQueued: failback queued a call whose first attempt failed.
	// Detail is a failback.Task; Delay the wait before its first retry.
	EventQueued
	// EventDropped: failback stopped retrying a call for an outside reason.
	// Detail is a failback.Task, whose Reason says why.
	EventDropped
	// EventStateChanged: a subscription, Registration or breaker changed state.
	// Detail is a subscriber.SubscriptionEvent, subscriber.RegistrationEvent or cluster.BreakerEvent.
	// Err is the reason, if any.
	EventStateChanged
	// EventDelivered: a subscription handled a list from the adapter.
	// Detail is a subscriber.SubscriptionEvent.
	EventDelivered
	// EventConfirmed: evidence that the registry holds a subscription.
	// Detail is a subscriber.SubscriptionEvent.
	EventConfirmed
	// EventConnection: a Manager's connection to its registry changed.
	// Detail is a subscriber.ConnectionChange.
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
	// Waiting marks an EventGiveUp that ends no attempt.
	// The loop stopped while waiting, or after a refusal.
	// Counters of attempts skip these.
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
	// Elapsed is the time since the work began (docs/observability.md), never
	// below 0 (a clock that stepped back).
	Elapsed time.Duration
	// Detail is the source's own record, nil for retry loops.
	// Read it with a type switch (see EventKind).
	Detail any
}

// Observer receives events; every package's WithObserver takes one.
// Observe is called synchronously, in order, and never under a lock.
// A slow Observe slows the emitting goroutine; a Queue moves it off.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// IsNilObserver reports whether o observes nothing.
// Nil, a typed nil and a zero Hooks do; WithObserver options ignore them.
func IsNilObserver(o Observer) bool {
	if o == nil {
		return true
	}
	if h, ok := o.(Hooks); ok {
		return h.isZero()
	}
	return nilness.Is(o) // a nil ObserverFunc, or a typed nil pointer
}

// WithObserver adds o as an observer of the loop's events.
// Several add up, called in order after the meter; a nil o is ignored.
// Observe runs on the loop's goroutine, and its panics are not recovered.
func WithObserver(o Observer) Option {
	if IsNilObserver(o) {
		return nil
	}
	return listenersOf(o) // made once: Retry and NewRetrier use it as it is
}

func (l *listeners) apply(c *config) { c.observers = append(c.observers, l) }

// defaultQueueCapacity is the capacity NewQueue uses for 0.
const defaultQueueCapacity = 4096

// Queue is an Observer that hands events, in order, to another on its own goroutine.
// Observe never blocks; a full queue drops and counts new events.
// A panic in the observer is recovered and logged. It is safe for concurrent use.
// Its owner stops it with Shutdown or Close (docs/observability.md).
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
	if IsNilObserver(o) {
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
