// Package regstatetest adapts functions to a rebound.Observer of a
// Registration's events, for the tests of the registry adapters.
package regstatetest

import (
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// StateChange and Attempt are the tests' views of a
// subscriber.RegistrationEvent, with the rebound.Event's Err.
type (
	StateChange struct {
		Registry string
		Key      subscriber.Key
		From, To subscriber.RegistrationState
		Reason   error
		At       time.Time
	}
	Attempt struct {
		Registry string
		Key      subscriber.Key
		Op       string
		Err      error
		Duration time.Duration
		At       time.Time
	}
)

// Hooks adapts functions to a rebound.Observer of a
// Registration's events; nil fields are skipped.
type Hooks struct {
	StateChanged func(StateChange)
	Attempted    func(Attempt)
}

func (h Hooks) Observe(e rebound.Event) {
	d, ok := e.Detail.(subscriber.RegistrationEvent)
	if !ok {
		return
	}
	switch e.Kind {
	case rebound.EventStateChanged:
		if h.StateChanged != nil {
			h.StateChanged(StateChange{Registry: d.Registry, Key: d.Key, From: d.From, To: d.To, Reason: e.Err, At: d.At})
		}
	case rebound.EventAttempt:
		if h.Attempted != nil {
			h.Attempted(Attempt{Registry: d.Registry, Key: d.Key, Op: d.Op, Err: e.Err, Duration: d.Duration, At: d.At})
		}
	}
}
