package sim

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Env is what a process's budget or throttle is built with: the virtual
// clock of the run and the process's own seed (ClientSeed).
type Env struct {
	// Now returns the current virtual time (Epoch + t).
	Now func() time.Time
	// Seed seeds the process's random draws.
	Seed uint64
}

// Budget is a process's retry budget, as the simulator uses it.
type Budget interface {
	// Deposit records a first attempt.
	Deposit()
	// Withdraw asks for one retry; false means refused, and the call is
	// dropped (as failback drops it, with a budget reason).
	Withdraw() bool
}

// Throttle is a process's adaptive client-side throttle, as the simulator
// uses it.
type Throttle interface {
	// Allow decides whether an attempt is sent (true) or refused locally
	// (false: the call backs off as after a failure).
	Allow() bool
	// Record reports the outcome of an attempt that was sent: accepted
	// means the server served it.
	Record(accepted bool)
}

// Strategy is how every process retries: a rebound.Policy (each call
// builds its own BackOff from it, as failback does per task) and,
// optionally, per-process state every call of the process shares: a rate
// limiter, a retry budget and an adaptive throttle. Processes never share
// anything.
type Strategy struct {
	// Name labels the strategy in results.
	Name string
	// Policy is validated with Policy.Validate. Leave MaxElapsed 0: the
	// BackOff would measure it with the real clock. A MaxAttempts makes
	// calls give up (counted in Result.GaveUp).
	Policy rebound.Policy
	// HonorRetryAfter makes a call wait at least the server's Retry-After
	// (with Config.RetryAfter), as rebound.Retry and failback do: the next
	// delay is max(BackOff delay, Retry-After).
	HonorRetryAfter bool
	// Limit is the rate (retries per second) of each process's own
	// limiter, waited for after the backoff delay (the semantics of
	// rebound.WithLimiter); 0 means no limiter. rate.Inf is allowed.
	Limit rate.Limit
	// Burst is the limiter's bucket size; at least 1 when Limit is set
	// and finite.
	Burst int
	// NewBudget, if not nil, builds each process's retry budget.
	NewBudget func(Env) Budget
	// NewThrottle, if not nil, builds each process's throttle.
	NewThrottle func(Env) Throttle
}

func (s Strategy) validate() error {
	var errs []error
	if err := s.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Policy: %w", err))
	}
	if s.Policy.MaxElapsed != 0 {
		errs = append(errs, fmt.Errorf("Policy.MaxElapsed = %v: must be 0 (it would read the real clock)", s.Policy.MaxElapsed))
	}
	if !(s.Limit >= 0) { // also catches NaN
		errs = append(errs, fmt.Errorf("Limit = %v: must not be negative (0 means no limiter)", s.Limit))
	}
	if s.Limit > 0 && s.Limit != rate.Inf && s.Burst < 1 {
		errs = append(errs, fmt.Errorf("Burst = %d: must be at least 1 with a finite Limit", s.Burst))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: Strategy %q: %w", ErrInvalid, s.Name, errors.Join(errs...))
	}
	return nil
}

// DefaultInterval is the fixed retry interval, 5 s: the retry period of
// Dubbo's classic failback cluster.
const DefaultInterval = 5 * time.Second

// Defaults of the budget and throttle in the strategies built by
// Strategies: Finagle's RetryBudget defaults and the SRE book's K.
const (
	DefaultBudgetRatio    = 0.2              // retries per first attempt
	DefaultBudgetFloor    = 10.0             // retries per second on top
	DefaultBudgetWindow   = 10 * time.Second // sliding window
	DefaultThrottleK      = 2.0              // accepts multiplier
	DefaultThrottleWindow = 2 * time.Minute  // history
	FleetMax              = 7 * time.Second  // the fleet strategy's Max
)

const (
	fleetName      = "fleet"
	budgetSuffix   = "+budget"
	throttleSuffix = "+throttle"
)

// Strategies returns the strategies compared by the storm example, in this
// order:
//
//	fixed-<interval>    NoJitter, Initial = Max = interval, Multiplier 1;
//	                    ignores Retry-After (Dubbo's failback)
//	full-jitter         the zero Policy, ignoring Retry-After: plain full
//	                    jitter, 1 s doubling to 30 s
//	rebound             rebound's defaults: the zero Policy, honouring
//	                    Retry-After (max of the two delays)
//	rebound+budget      and a retry budget per process
//	rebound+throttle    and an adaptive throttle per process
//	rebound+budget+throttle
//	fleet               DecorrelatedJitter capped at FleetMax (7 s),
//	                    honouring Retry-After: the documented strategy for
//	                    fleets whose outages are short (see the README)
//
// Budgets and throttles are built per process with the Default* figures
// above; no process shares anything with another.
func Strategies(interval time.Duration) []Strategy {
	d := rebound.Policy{}
	budget := newBudget(DefaultBudgetRatio, DefaultBudgetFloor, DefaultBudgetWindow)
	throttle := newThrottle(DefaultThrottleK, DefaultThrottleWindow)
	return []Strategy{
		{Name: "fixed-" + interval.String(), Policy: rebound.Policy{
			Initial: interval, Multiplier: 1, Max: interval, Jitter: rebound.NoJitter}},
		{Name: "full-jitter", Policy: d},
		{Name: "rebound", Policy: d, HonorRetryAfter: true},
		{Name: "rebound" + budgetSuffix, Policy: d, HonorRetryAfter: true, NewBudget: budget},
		{Name: "rebound" + throttleSuffix, Policy: d, HonorRetryAfter: true, NewThrottle: throttle},
		{Name: "rebound" + budgetSuffix + throttleSuffix, Policy: d, HonorRetryAfter: true, NewBudget: budget, NewThrottle: throttle},
		{Name: fleetName, Policy: rebound.Policy{Max: FleetMax, Jitter: rebound.DecorrelatedJitter}, HonorRetryAfter: true},
	}
}
