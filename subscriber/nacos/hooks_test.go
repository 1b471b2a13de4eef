package nacos_test

import "github.com/rebound-go/rebound/subscriber/internal/regstate/regstatetest"

// The tests' views of a subscriber.RegistrationEvent (regstatetest).
type (
	regStateChange    = regstatetest.StateChange
	regAttempt        = regstatetest.Attempt
	registrationHooks = regstatetest.Hooks
)
