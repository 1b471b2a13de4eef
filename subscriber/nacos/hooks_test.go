package nacos_test

import (
	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// registrationHooks adapts functions to a rebound.Observer of a
// Registration's events; nil fields are skipped.
type registrationHooks struct {
	StateChanged func(subscriber.RegistrationStateChange)
	Attempted    func(subscriber.RegistrationAttempt)
}

func (h registrationHooks) Observe(e rebound.Event) {
	switch d := e.Detail.(type) {
	case subscriber.RegistrationStateChange:
		if h.StateChanged != nil {
			h.StateChanged(d)
		}
	case subscriber.RegistrationAttempt:
		if h.Attempted != nil {
			h.Attempted(d)
		}
	}
}
