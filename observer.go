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

// EventKind says what happened. One enumeration serves every source of
// events in rebound: the retry loops of this package, failback's
// background retries, a subscriber Manager's subscriptions and a
// Registration, and cluster's breakers. Each kind's doc names the sources
// that emit it and the Detail they attach.
type EventKind uint8

const (
	// EventRetry: an attempt failed with a transient error and the next
	// one is due after Delay. Retry loops; failback (Detail a
	// failback.Task).
	EventRetry EventKind = iota + 1
	// EventGiveUp: the work ended with the error Err. Retry loops (Waiting
	// when no attempt ended there); failback (Detail a failback.Task, Err
	// a *RetryError).
	EventGiveUp
	// EventAttempt: an attempt ended, Err its outcome (nil: success).
	// Retry loops; a Registration's requests (Detail a
	// subscriber.RegistrationAttempt).
	EventAttempt
	// EventRecovered: an attempt succeeded after at least one failure.
	// Retry loops; failback (a retry succeeded; Detail a failback.Task).
	EventRecovered
	// EventThrottled: an attempt that was due was refused locally and not
	// sent: by the AdaptiveThrottle, the RetryBudget or a Breaker, under
	// every refusal rule (WithRefusal; Err ErrThrottled,
	// ErrBudgetExhausted or a *BreakerError; Delay the wait before the
	// next try, 0 if the loop gives up or drops the work), or deferred by
	// a subscription's throttle or budget (Detail a subscriber.Deferral).
	EventThrottled
	// EventQueued: failback queued a call whose first attempt failed
	// (Detail a failback.Task, Delay the wait before its first retry).
	EventQueued
	// EventDropped: failback will not retry a call (any further) for a
	// reason other than its own outcome (Detail a failback.Task, whose
	// Reason says why).
	EventDropped
	// EventStateChanged: something moved from one state to another:
	// a subscription (Detail a subscriber.StateChange), a Registration
	// (subscriber.RegistrationStateChange), a breaker
	// (cluster.BreakerEvent). Err is the reason, if any.
	EventStateChanged
	// EventDelivered: a subscription decided what to do with a list the
	// adapter handed over (Detail a subscriber.Delivery).
	EventDelivered
	// EventConfirmed: evidence that the registry holds a subscription
	// (Detail a subscriber.Confirmation).
	EventConfirmed
	// EventConnection: a Manager's connection to its registry changed
	// (Detail a subscriber.ConnectionChange).
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

// Event is what an Observer receives: one thing that happened, named by
// Kind. It is passed by value; the retry loops fill only the numeric
// fields and Err, so observing them costs no allocation. Other sources
// attach their own record in Detail (see EventKind).
type Event struct {
	Kind EventKind
	// Waiting is set on an EventGiveUp of a retry loop that ends no
	// attempt: the loop stopped while waiting for its next attempt (its
	// context done, a deadline, a limiter token past MaxElapsed; that
	// attempt's failure was already reported with EventRetry), or after
	// an attempt refused locally (EventThrottled). Counters of attempts
	// skip these.
	Waiting bool
	// Attempt is the number of attempts made so far (1 for the first);
	// failback counts its first attempt (in Invoke) too.
	Attempt int
	// Err is the attempt's error (EventAttempt: nil for a success;
	// EventRetry; EventThrottled), the error the work ends with
	// (EventGiveUp), or the reason of a change (EventStateChanged);
	// nil for EventRecovered.
	Err error
	// Delay is the wait before the next attempt, Retry-After included and
	// limiter wait not (EventRetry, EventQueued, EventThrottled).
	Delay time.Duration
	// LimiterWait is the time an attempt waited for a limiter token after
	// its Delay (EventAttempt and EventRecovered of retry loops; 0
	// without WithLimiter, and for a first attempt that is not behind the
	// limiter: see WithAdmission).
	LimiterWait time.Duration
	// Elapsed is the time since the work began. For retry loops: since the
	// start of the first attempt when the policy has a MaxElapsed,
	// otherwise since that attempt failed (the success path never reads
	// the clock), 0 for the first attempt's own event. For failback: since
	// the first attempt failed.
	Elapsed time.Duration
	// Detail is the source's own record of the event, nil for the events
	// of this package's retry loops: a value of type failback.Task,
	// subscriber.StateChange, subscriber.Delivery, subscriber.Confirmation,
	// subscriber.Deferral, subscriber.ConnectionChange,
	// subscriber.RegistrationStateChange, subscriber.RegistrationAttempt or
	// cluster.BreakerEvent. Read it with a type switch.
	Detail any
}

// Observer receives events. It is the one observer shape of rebound:
// WithObserver here, and the WithObserver option of failback, subscriber,
// cluster (WithBreakerObserver) and the registry adapters (for
// Registrations) all take one. Metrics (WithMeterProvider), logging
// (package logging) and the status page (package statusz) are observers
// of the same events.
//
// Every source calls Observe synchronously, from the goroutine where the
// event happened, never with a lock of rebound's held, one event at a time
// per unit of work (a loop, a call, a subscription, a registration), in
// the order the events happened. A slow Observe therefore slows that
// goroutine, which each source's doc names; wrap an observer in a Queue
// (NewQueue) to move it to a goroutine of its own.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// IsNilObserver reports whether o observes nothing: a nil interface, a
// nil ObserverFunc, a zero Hooks, or a typed nil (a nil pointer, func,
// map, slice or channel in the interface, such as a nil *Queue or
// *statusz.EventLog). The WithObserver options ignore such an observer.
func IsNilObserver(o Observer) bool {
	if o == nil {
		return true
	}
	if h, ok := o.(Hooks); ok {
		return h.isZero()
	}
	return nilness.Is(o) // a nil ObserverFunc, or a typed nil pointer
}

// WithObserver adds o as an observer of the loop's events (see Observer
// and EventKind): for one attempt, EventAttempt, then EventRetry or
// EventRecovered or EventGiveUp; an attempt refused locally is reported by
// EventThrottled alone (then EventGiveUp if the loop stops). Observe is
// called from the goroutine running the loop (a slow observer slows only
// its own loop); a panic in it is not recovered (it is the caller's own
// code, on the caller's goroutine). Several WithObserver options add up,
// called in the order given, after the meter of WithMeterProvider. A nil
// observer is ignored. Build the option once: Retry given only observers
// and meters allocates nothing when its first attempt succeeds.
func WithObserver(o Observer) Option {
	if IsNilObserver(o) {
		return nil
	}
	return listenersOf(o) // made once: Retry and NewRetrier use it as it is
}

func (l *listeners) apply(c *config) { c.observers = append(c.observers, l) }

// DefaultQueueCapacity is the capacity NewQueue uses for 0.
const DefaultQueueCapacity = 4096

// Queue is an Observer that hands events to another Observer on a
// goroutine of its own, through a bounded queue in the order they were
// observed: Observe never blocks, so a slow observer behind a Queue stalls
// none of the goroutines that emit events. When the queue is full, new
// events are dropped and counted (Dropped), with one warning logged per
// episode (from the first drop until the observer has caught up with
// every event queued). A panic in the observer is recovered and logged at Error; the
// goroutine goes on. A Queue is safe for concurrent use; one Queue may
// serve several sources.
//
// Its owner stops it: Shutdown delivers the events queued so far, Close
// drops them; both wait for the goroutine to end. Events observed after
// either begins are dropped (not counted).
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

// NewQueue starts a Queue in front of o holding up to capacity events (0:
// DefaultQueueCapacity). log receives the overrun warnings and recovered
// panics (nil: no logging). o must not be nil; capacity must not be
// negative.
func NewQueue(o Observer, capacity int, log *zap.Logger) (*Queue, error) {
	if IsNilObserver(o) {
		return nil, &ArgumentError{Func: "rebound.NewQueue", Arg: "o", Reason: "must not be nil"}
	}
	if capacity < 0 {
		return nil, &ArgumentError{Func: "rebound.NewQueue", Arg: "capacity", Reason: "must not be negative"}
	}
	if capacity == 0 {
		capacity = DefaultQueueCapacity
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

// Len returns the number of events waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf) - q.head
}

// Shutdown stops the Queue once the events queued so far are delivered,
// or, when ctx is done first, drops the rest and returns an error wrapping
// ctx.Err() after the event being delivered returns. Called from the
// observer itself (which it would wait for), it returns
// ErrCalledFromCallback at once and the Queue stops after that call.
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

// Close stops the Queue, dropping the events still queued, and waits for
// the event being delivered. It is idempotent; called from the observer
// itself it returns ErrCalledFromCallback without waiting.
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
