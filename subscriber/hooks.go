package subscriber

import (
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// SubscriptionEvent is the Detail of a subscription's events: its
// Registry.Subscribe calls, state changes, deliveries, confirmations and
// deferrals. The rebound.Event's Kind says which; its Attempt, Err and
// Delay carry the attempt, the error or reason, and the wait.
type SubscriptionEvent struct {
	Key Key
	ID  uint64 // the subscription (Status.ID)
	At  time.Time
	// From and To are an EventStateChanged's states; From is 0 at the creation.
	From, To State
	// Result is what became of an EventDelivered's list: "delivered",
	// "duplicate", "empty_held" or "stale". Instances is its length.
	Result    string
	Instances int
	// Reason is an EventConfirmed's evidence from the adapter, or "subscribe".
	Reason string

	evidence bool // from Sink.Confirmed (the metric's reason=evidence), not an acknowledged Subscribe
}

// What became of a list the adapter handed over (SubscriptionEvent.Result).
const (
	resDelivered = "delivered"  // the listener was called with it
	resDuplicate = "duplicate"  // equal to the list last delivered: dropped
	resEmptyHeld = "empty_held" // an empty list held back (WithEmptyListHold)
	resStale     = "stale"      // replaced by a newer list before delivery
)

// ConnectionChange is the Detail of an EventConnection.
type ConnectionChange struct {
	Connected     bool // false: the connection was lost
	Subscriptions int  // the running subscriptions affected
	At            time.Time
}

// event is the rebound.Event of a ConnectionChange.
func event(d ConnectionChange) rebound.Event {
	return rebound.Event{Kind: rebound.EventConnection, Detail: d}
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
