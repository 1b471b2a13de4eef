package subscriber

import (
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// SubscribeAttempt is the Detail of a subscription's EventAttempt, and of
// the EventRetry or EventGiveUp after a failed one.
type SubscribeAttempt struct {
	Key     Key
	ID      uint64        // the subscription (Status.ID)
	Attempt int           // 1 for the first of a run
	Err     error         // nil: acknowledged
	Delay   time.Duration // the wait before the next attempt, 0 if none
	At      time.Time
}

// StateChange is the Detail of a subscription's EventStateChanged.
type StateChange struct {
	Key      Key
	ID       uint64
	From, To State // From is 0 at the creation
	Reason   error // why, as in Status.LastErr; nil for a success
	At       time.Time
}

// What became of a list the adapter handed over (Delivery.Result).
const (
	resDelivered = "delivered"  // the listener was called with it
	resDuplicate = "duplicate"  // equal to the list last delivered: dropped
	resEmptyHeld = "empty_held" // an empty list held back (WithEmptyListHold)
	resStale     = "stale"      // replaced by a newer list before delivery
)

// Delivery is the Detail of an EventDelivered.
type Delivery struct {
	Key       Key
	ID        uint64
	Result    string // "delivered", "duplicate", "empty_held" or "stale"
	Instances int    // the list's length
	At        time.Time
}

// Confirmation is the Detail of an EventConfirmed.
type Confirmation struct {
	Key    Key
	ID     uint64
	Reason string // the adapter's evidence, or "subscribe"
	At     time.Time

	evidence bool // from Sink.Confirmed (the metric's reason=evidence), not an acknowledged Subscribe
}

// Deferral is the Detail of a subscription's EventThrottled.
type Deferral struct {
	Key    Key
	ID     uint64
	Reason error         // the refusal, as in Status.DeferReason
	Delay  time.Duration // the wait before the attempt is asked again
	At     time.Time
}

// ConnectionChange is the Detail of an EventConnection.
type ConnectionChange struct {
	Connected     bool // false: the connection was lost
	Subscriptions int  // the running subscriptions affected
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
