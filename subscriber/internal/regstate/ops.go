package regstate

import (
	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
	"github.com/rebound-go/rebound/subscriber"
)

// The request kinds of a registration (subscriber.RegistrationEvent.Op,
// and the op attribute of its metrics).
const (
	OpRegister   = "register"   // a register request: the first, or a repair
	OpCheck      = "check"      // a query of whether the registry still holds it
	OpUpdate     = "update"     // a request made by Update
	OpDeregister = "deregister" // a deregister request, or the check that it is gone
)

// ErrStopped is wrapped by the error of Registration.Update after
// Shutdown or Close, or after the registration stopped for good on a
// permanent error. It matches rebound.ErrClosed.
var ErrStopped = closed.New("subscriber: registration stopped")

// CheckRegistrable returns a *rebound.ArgumentError naming fn when inst's
// Enabled, Healthy and Weight are all zero: consumers filter such an
// instance out, so no call would reach it. Register and Update call it.
func CheckRegistrable(fn string, inst subscriber.Instance) error {
	if inst.Enabled || inst.Healthy || inst.Weight != 0 {
		return nil
	}
	return &rebound.ArgumentError{Func: fn, Arg: "inst.Enabled, inst.Healthy, inst.Weight",
		Reason: "are all zero (false, false, 0): no consumer picks such an instance; set Enabled: true, Healthy: true and a Weight > 0 (for example 1)"}
}
