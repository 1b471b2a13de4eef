package rebound

import (
	"fmt"
	"time"

	"github.com/rebound-go/rebound/internal/admit"
)

// attemptKind is what an attempt is, for admission. Admit infers it from
// the run; a lookup is asked through internal/admit.
type attemptKind uint8

const (
	// kindFirst is the first attempt of a run: after NewSchedule, Reset
	// or a success.
	kindFirst attemptKind = iota
	// kindRetry is an attempt after a failure of the run.
	kindRetry
	// kindLookup is a read beside the run (a subscription's confirmation
	// lookup): it takes its admission but is not an attempt of the run
	// (no attempt counted, no MaxElapsed). It holds its own token, apart
	// from the run's; a refusal by the throttle leaves the run as it is.
	kindLookup

	numKinds = 3
)

// gate is a set of the admission checks an attempt passes before it is
// made (withAdmission; internal/admit documents each).
type gate = admit.Gate

const (
	gateLimiter  = admit.Limiter
	gateBudget   = admit.Budget
	gateThrottle = admit.Throttle
	gateBreaker  = admit.Breaker

	allGates = gateLimiter | gateBudget | gateThrottle | gateBreaker

	// throttleUnsent marks, in the gates passed, an attempt the throttle
	// admitted that is not yet counted as its request (not yet sent).
	throttleUnsent gate = 1 << 7
)

// defaultGates is the admission of each kind without withAdmission: a
// first attempt takes no limiter token (the limiter paces retries), a
// retry passes every gate, a lookup takes a token only.
var defaultGates = [numKinds]gate{
	kindFirst:  gateBudget | gateThrottle | gateBreaker,
	kindRetry:  allGates,
	kindLookup: gateLimiter,
}

// refusalRule is what a refusal by the budget, the throttle or the breaker
// does to the loop (withRefusal; internal/admit documents each).
type refusalRule = admit.Refusal

const (
	refuseDefault refusalRule = 0
	refuseStop                = admit.Stop
	refuseDefer               = admit.Defer
	refuseDrop                = admit.Drop
)

// The options of internal/admit, for rebound's own layers.
func init() {
	admit.First = func(g admit.Gate) any { return withAdmission(kindFirst, g) }
	admit.Refuse = func(g admit.Gate, r admit.Refusal) any { return withRefusal(g, r) }
	admit.Seed = func(seed uint64) any { return withSeed(seed) }
	admit.Engine = engineOf
	admit.Unobserved = func() any { return unobserved }
	admit.Begin = func(r any, now time.Time) error { return r.(*Retrier).beginFirst(now) }
	admit.Record = func(r any, err error, now time.Time) { r.(*Retrier).recordFirst(err, now) }
	admit.FirstDelay = func(s any) time.Duration { return s.(*Schedule).firstDelay() }
	admit.Attempts = func(s any) int { return s.(*Schedule).attempts }
	admit.Normalized = func(p any) any { return p.(Policy).normalized() }
	admit.Lookup = func(s any, now time.Time) (bool, time.Duration, error, error) {
		_, d := s.(*Schedule).lookup(now)
		return d.Stop, d.Delay, d.Reason, d.Err
	}
}

// engineOf returns what opts, a []Option, set (admit.Engine).
func engineOf(opts any) admit.Settings {
	os, _ := opts.([]Option)
	c := newConfig(os)
	s := admit.Settings{Budget: c.budget != nil, Throttle: c.throttle != nil}
	if c.meter != nil {
		s.MeterProvider, s.MeterAttrs = c.meter.mp, c.meter.attrs
	}
	if c.tracer != nil {
		s.Tracer = c.tracer.tr
	}
	for _, o := range os {
		if v, ok := o.(*observerOption); ok {
			s.Observers = append(s.Observers, v.o)
		}
	}
	return s
}

// unobserved drops the observers, meter and tracer set before it.
var unobserved Option = optionFunc(func(c *config) { c.observers, c.meter, c.tracer = nil, nil, nil })

// refusalGate is the index of a gate that can refuse in config.refusal.
func refusalGate(g gate) int {
	switch g {
	case gateBudget:
		return 0
	case gateThrottle:
		return 1
	case gateBreaker:
		return 2
	}
	return -1
}

// defaultRefusal is each refusing gate's rule without withRefusal.
var defaultRefusal = [3]refusalRule{refuseStop, refuseDefer, refuseDefer}

// withAdmission sets the gates an attempt of kind k passes before it is
// made (defaults: defaultGates). A gate whose part is not configured (no
// WithLimiter, no WithBudget...) admits every attempt. An unknown kind or
// gate is an *ArgumentError.
func withAdmission(k attemptKind, g gate) Option {
	return optionFunc(func(c *config) {
		switch {
		case k >= numKinds:
			c.bad("WithAdmission", "k", fmt.Sprintf("is %d: must be a first, retry or lookup attempt", k))
		case k == kindLookup && g&(gateBudget|gateBreaker) != 0:
			c.bad("WithAdmission", "g", "may hold only admit.Limiter and admit.Throttle for kindLookup: a lookup is not an attempt of the run, so it neither draws on the budget nor holds a breaker admission")
		case g&^allGates != 0:
			c.bad("WithAdmission", "g", fmt.Sprintf("has unknown bits %#x: must be a set of admit.Limiter, admit.Budget, admit.Throttle, admit.Breaker", uint8(g&^allGates)))
		default:
			c.gates[k] = g
			c.gatesSet[k] = true
		}
	})
}

// withRefusal sets what a refusal by gate g (the budget, the throttle or
// the breaker; the limiter never refuses, it makes the attempt wait) does.
// Defaults: defaultRefusal. Anything else is an *ArgumentError.
func withRefusal(g gate, r refusalRule) Option {
	return optionFunc(func(c *config) {
		i := refusalGate(g)
		switch {
		case i < 0:
			c.bad("WithRefusal", "g", fmt.Sprintf("is %#x: must be one of admit.Budget, admit.Throttle, admit.Breaker", uint8(g)))
		case r < refuseStop || r > refuseDrop:
			c.bad("WithRefusal", "r", fmt.Sprintf("is %d: must be admit.Stop, admit.Defer or admit.Drop", r))
		default:
			c.refusal[i] = r
		}
	})
}

// gatesOf returns the admission of kind k.
func (c *config) gatesOf(k attemptKind) gate {
	if c.gatesSet[k] {
		return c.gates[k]
	}
	return defaultGates[k]
}

// refusalOf returns the rule of the refusing gate g.
func (c *config) refusalOf(g gate) refusalRule {
	i := refusalGate(g)
	if r := c.refusal[i]; r != refuseDefault {
		return r
	}
	return defaultRefusal[i]
}

// budgetAtFailure reports whether a retry's withdrawal from the budget is
// made when the failure is reported (Next): a refusal that stops the loop
// is known then, so the loop does not wait a delay to learn it. Under the
// other rules the withdrawal is made when the retry is due.
func (c *config) budgetAtFailure() bool {
	return c.budget != nil && c.gatesOf(kindRetry)&gateBudget != 0 && c.refusalOf(gateBudget) == refuseStop
}

// begin accounts for a run's first attempt at now: a deposit in the
// budget, a request for the throttle. It reports whether the throttle lets
// the attempt through (false: rejected locally, do not send it).
func (c *config) begin(now time.Time) bool {
	g := c.gatesOf(kindFirst)
	if c.budget != nil && g&gateBudget != 0 {
		c.budget.deposit(now) // the work arrived (see ready)
	}
	return c.throttle == nil || g&gateThrottle == 0 || c.throttle.allow(now)
}

// record gives the throttle an attempt's outcome.
func (c *config) record(err error, now time.Time) {
	if c.throttle != nil && (err == nil || !c.isTransient(err)) {
		c.throttle.accepted(now)
	}
}
