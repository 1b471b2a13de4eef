package subscriber

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Hooks are called on the life events of a Manager's subscriptions, for
// metrics and tracing (WithMeterProvider records the Manager's
// OpenTelemetry metrics from the same events). Set them with WithHooks;
// nil fields are skipped.
//
// Hooks are never called with a lock held, and never from a subscription's
// own goroutines: the Manager queues every event (in the order they
// happened, per subscription and overall) and one goroutine owned by the
// Manager calls the hooks one at a time. A slow hook therefore delays
// later hook calls, never a subscription. The queue holds up to
// WithHookQueue events (default DefaultHookQueue); when it is full, new
// events are dropped and counted (Counts.DroppedEvents), and the Manager
// logs one warning per episode. Status and Counts are always exact, so a
// gauge should be read from Counts, not rebuilt from events. Close
// delivers the events queued before it and then stops the goroutine.
//
// A hook may call Status, Counts and Subscription methods; it must not
// call Close or Shutdown (they wait for the hook goroutine: Close returns
// ErrCalledFromCallback instead of deadlocking).
type Hooks struct {
	// StateChanged: a subscription moved from one State to another
	// (including pending at its creation, From 0, and stopped at its end,
	// with the reason).
	StateChanged func(StateChange)
	// Delivered: the adapter handed over a list and the Manager decided
	// what to do with it (DeliveryResult).
	Delivered func(Delivery)
	// Confirmed: the adapter reported evidence that the registry holds a
	// subscription (Sink.Confirmed), or a Registry.Subscribe call was
	// acknowledged (Reason "subscribe").
	Confirmed func(Confirmation)
	// Connection: the ConnectionMonitor reported a connection change.
	Connection func(ConnectionChange)
	// Deferred: an attempt that was due was not sent, deferred locally by
	// the throttle (WithThrottle) or the retry budget (WithBudget).
	Deferred func(Deferral)
}

func (h Hooks) empty() bool {
	return h.StateChanged == nil && h.Delivered == nil && h.Confirmed == nil && h.Connection == nil && h.Deferred == nil
}

// StateChange is passed to Hooks.StateChanged.
type StateChange struct {
	Key Key
	// ID identifies the subscription within its Manager (Status.ID).
	ID       uint64
	From, To State
	// Reason is why it changed: the error of the failed attempt, the
	// disruption (ErrDisconnected, the adapter's Resubscribe error,
	// ErrNotConfirmed), or why it stopped; nil for a success.
	Reason error
	At     time.Time
}

// DeliveryResult says what became of a list the adapter handed over.
type DeliveryResult int

const (
	// Delivered: the listener was called with the list.
	Delivered DeliveryResult = iota + 1
	// Duplicate: the list equals the one last delivered; dropped.
	Duplicate
	// EmptyHeld: an empty list held back to keep the last known good one
	// (see WithEmptyListHold).
	EmptyHeld
	// Stale: a newer list replaced it before the listener could be called
	// (a burst coalesced), or a reconciliation's read was overtaken by a
	// push.
	Stale
)

func (r DeliveryResult) String() string {
	switch r {
	case Delivered:
		return "delivered"
	case Duplicate:
		return "duplicate"
	case EmptyHeld:
		return "empty_held"
	case Stale:
		return "stale"
	}
	return "DeliveryResult(" + strconv.Itoa(int(r)) + ")"
}

// Delivery is passed to Hooks.Delivered.
type Delivery struct {
	Key       Key
	ID        uint64
	Result    DeliveryResult
	Instances int // length of the list
	At        time.Time
}

// Confirmation is passed to Hooks.Confirmed.
type Confirmation struct {
	Key    Key
	ID     uint64
	Reason string // the adapter's evidence, or "subscribe" for an acknowledged Subscribe
	At     time.Time

	evidence bool // from Sink.Confirmed (the metric's reason=evidence), not an acknowledged Subscribe
}

// Deferral is passed to Hooks.Deferred.
type Deferral struct {
	Key    Key
	ID     uint64
	Reason error         // rebound.ErrThrottled or rebound.ErrBudgetExhausted (a wrapped rebound.ErrExhausted: a limiter with burst 0)
	Delay  time.Duration // the backoff step before the attempt is asked again
	At     time.Time
}

// ConnectionChange is passed to Hooks.Connection.
type ConnectionChange struct {
	State ConnState
	// Subscriptions is the number of running subscriptions affected.
	Subscriptions int
	At            time.Time
}

// DefaultHookQueue is the default capacity of the hook event queue.
const DefaultHookQueue = 4096

type hookEvent struct {
	state *StateChange
	del   *Delivery
	conf  *Confirmation
	conn  *ConnectionChange
	def   *Deferral
}

// dispatcher is the hook goroutine and its bounded, ordered queue.
type dispatcher struct {
	h       Hooks
	log     *zap.Logger
	mu      sync.Mutex
	queue   []hookEvent
	head    int
	cap     int
	signal  chan struct{}
	closing bool
	overrun bool // dropping since the last successful enqueue
	dropped atomic.Uint64
	done    chan struct{}
}

func newDispatcher(h Hooks, capacity int, log *zap.Logger) *dispatcher {
	return &dispatcher{h: h, log: log, cap: capacity, signal: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues an event; it never blocks. Safe with any lock held.
func (d *dispatcher) push(ev hookEvent) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return
	}
	if len(d.queue)-d.head >= d.cap {
		warn := !d.overrun
		d.overrun = true
		d.mu.Unlock()
		d.dropped.Add(1)
		if warn {
			d.log.Warn("hook queue full: dropping hook events (a hook is too slow)", zap.Int("capacity", d.cap))
		}
		return
	}
	d.overrun = false
	d.queue = append(d.queue, ev)
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// close makes run return once the events queued so far are delivered.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		if d.head == len(d.queue) {
			d.queue, d.head = d.queue[:0], 0
			if d.closing {
				d.mu.Unlock()
				return
			}
			d.mu.Unlock()
			<-d.signal
			continue
		}
		ev := d.queue[d.head]
		d.queue[d.head] = hookEvent{}
		d.head++
		d.mu.Unlock()
		d.call(ev)
	}
}

func (d *dispatcher) call(ev hookEvent) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("hook panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	switch {
	case ev.state != nil && d.h.StateChanged != nil:
		d.h.StateChanged(*ev.state)
	case ev.del != nil && d.h.Delivered != nil:
		d.h.Delivered(*ev.del)
	case ev.conf != nil && d.h.Confirmed != nil:
		d.h.Confirmed(*ev.conf)
	case ev.def != nil && d.h.Deferred != nil:
		d.h.Deferred(*ev.def)
	case ev.conn != nil && d.h.Connection != nil:
		d.h.Connection(*ev.conn)
	}
}
