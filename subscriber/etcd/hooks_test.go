package etcd_test

import (
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// regStateChange and regAttempt are the tests' views of a
// subscriber.RegistrationEvent, with the rebound.Event's Err.
type (
	regStateChange struct {
		Registry string
		Key      subscriber.Key
		From, To subscriber.RegistrationState
		Reason   error
		At       time.Time
	}
	regAttempt struct {
		Registry string
		Key      subscriber.Key
		Op       string
		Err      error
		Duration time.Duration
		At       time.Time
	}
)

// registrationHooks adapts functions to a rebound.Observer of a
// Registration's events; nil fields are skipped.
type registrationHooks struct {
	StateChanged func(regStateChange)
	Attempted    func(regAttempt)
}

func (h registrationHooks) Observe(e rebound.Event) {
	d, ok := e.Detail.(subscriber.RegistrationEvent)
	if !ok {
		return
	}
	switch e.Kind {
	case rebound.EventStateChanged:
		if h.StateChanged != nil {
			h.StateChanged(regStateChange{Registry: d.Registry, Key: d.Key, From: d.From, To: d.To, Reason: e.Err, At: d.At})
		}
	case rebound.EventAttempt:
		if h.Attempted != nil {
			h.Attempted(regAttempt{Registry: d.Registry, Key: d.Key, Op: d.Op, Err: e.Err, Duration: d.Duration, At: d.At})
		}
	}
}
