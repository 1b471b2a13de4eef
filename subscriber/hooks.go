package subscriber

import (
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// SubscribeAttempt is the Detail of a subscription's rebound.EventAttempt
// (Hooks.Attempted), and of the EventRetry or EventGiveUp that follows a
// failed one.
type SubscribeAttempt struct {
	Key Key
	ID  uint64
	// Attempt counts the attempts of the current run (1 for the first
	// after a subscribe, a disruption or a success).
	Attempt int
	// Err is the call's error, nil if the registry acknowledged it.
	Err error
	// Delay is the wait before the next attempt after a failure (0 after
	// a success, a permanent error, or an attempt asked again at once).
	Delay time.Duration
	At    time.Time
}

// StateChange is the Detail of a rebound.EventStateChanged (Hooks.StateChanged).
type StateChange struct {
	Key Key
	// ID identifies the subscription within its Manager (Status.ID).
	ID       uint64
	From, To State
	// Reason is why it changed: the error of the failed attempt, the
	// disruption (ErrDisconnected, the adapter's Resubscribe error,
	// errNotConfirmed), or why it stopped; nil for a success.
	Reason error
	At     time.Time
}

// What became of a list the adapter handed over (Delivery.Result).
const (
	resDelivered = "delivered"  // the listener was called with it
	resDuplicate = "duplicate"  // equal to the list last delivered: dropped
	resEmptyHeld = "empty_held" // an empty list held back (WithEmptyListHold)
	resStale     = "stale"      // replaced by a newer list before delivery
)

// Delivery is the Detail of a rebound.EventDelivered (Hooks.Delivered).
type Delivery struct {
	Key Key
	ID  uint64
	// Result is what became of the list: "delivered", "duplicate" (equal
	// to the last one), "empty_held" (WithEmptyListHold) or "stale"
	// (replaced by a newer list, or a lookup overtaken by a push).
	Result    string
	Instances int // length of the list
	At        time.Time
}

// Confirmation is the Detail of a rebound.EventConfirmed (Hooks.Confirmed).
type Confirmation struct {
	Key    Key
	ID     uint64
	Reason string // the adapter's evidence, or "subscribe" for an acknowledged Subscribe
	At     time.Time

	evidence bool // from Sink.Confirmed (the metric's reason=evidence), not an acknowledged Subscribe
}

// Deferral is the Detail of a rebound.EventThrottled (Hooks.Deferred).
type Deferral struct {
	Key    Key
	ID     uint64
	Reason error         // rebound.ErrThrottled or rebound.ErrBudgetExhausted (a wrapped rebound.ErrExhausted: a limiter with burst 0)
	Delay  time.Duration // the backoff step before the attempt is asked again
	At     time.Time
}

// ConnectionChange is the Detail of a rebound.EventConnection (Hooks.Connection).
type ConnectionChange struct {
	State ConnState
	// Subscriptions is the number of running subscriptions affected.
	Subscriptions int
	At            time.Time
}

// event is the rebound.Event of a detail.
func event(d any) rebound.Event {
	switch d := d.(type) {
	case StateChange:
		return rebound.Event{Kind: rebound.EventStateChanged, Err: d.Reason, Detail: d}
	case Delivery:
		return rebound.Event{Kind: rebound.EventDelivered, Detail: d}
	case Confirmation:
		return rebound.Event{Kind: rebound.EventConfirmed, Detail: d}
	case Deferral:
		return rebound.Event{Kind: rebound.EventThrottled, Err: d.Reason, Delay: d.Delay, Detail: d}
	case ConnectionChange:
		return rebound.Event{Kind: rebound.EventConnection, Detail: d}
	case SubscribeAttempt:
		return rebound.Event{Kind: rebound.EventAttempt, Attempt: d.Attempt, Err: d.Err, Detail: d}
	}
	return rebound.Event{Detail: d}
}

// observed reports whether the Manager has observers.
func (m *Manager) observed() bool { return len(m.observers) > 0 }

// emit hands evs, in order, to every observer: with no lock held, the
// calling goroutine marked as running a callback (so that Close from an
// observer does not wait for itself), a panic recovered and logged.
func (m *Manager) emit(evs ...rebound.Event) {
	if m.userObs { // the metrics observer calls nothing back: no mark (it reads the goroutine's id)
		defer m.inCB.enter()()
	}
	for _, ev := range evs {
		for _, o := range m.observers {
			m.observe(o, ev)
		}
	}
}

func (m *Manager) observe(o rebound.Observer, ev rebound.Event) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("observer panicked", zap.Stringer("kind", ev.Kind), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	o.Observe(ev)
}
