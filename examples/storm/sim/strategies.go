package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
)

// Env is what a process's own options are built with.
type Env struct {
	// Seed is the process's own seed (ClientSeed): seed its throttle's
	// random source with it to keep runs deterministic.
	Seed uint64
}

// Strategy is how every process retries: a rebound.Policy and the options
// of each process's rebound.Retrier — its own budget, throttle, limiter —
// built per process by Process. Each call runs on its own
// rebound.Schedule of its process's Retrier, as failback's tasks do.
// Processes never share anything.
type Strategy struct {
	// Name labels the strategy in results.
	Name string
	// Policy is the retry policy (validated by rebound.NewRetrier).
	Policy rebound.Policy
	// Limits are when a call stops (rebound.WithMaxAttempts,
	// rebound.WithMaxElapsed); none: never.
	Limits []rebound.Option
	// HonorRetryAfter passes the server's Retry-After (Config.RetryAfter)
	// to the Schedule with the error (rebound.RetryAfter), which then
	// waits at least that long (clamped to Policy.MaxRetryAfter): what
	// rebound's loops and failback do with a server's Retry-After. Without
	// it the call retries on its backoff alone, like a client that ignores
	// the header.
	HonorRetryAfter bool
	// Process, if not nil, returns the options of process i's Retrier:
	// rebound.WithBudget, WithThrottle, WithLimiter with objects of its
	// own. Do not pass a seed (the simulator seeds every Retrier) or
	// anything that reads the real clock.
	Process func(Env) []rebound.Option
}

func (s Strategy) validate() error {
	if _, err := rebound.NewRetrier(s.Policy); err != nil {
		return fmt.Errorf("%w: Strategy %q: Policy: %w", ErrInvalid, s.Name, err)
	}
	return nil
}

// The settings of the budget and the throttle in Strategies: Finagle's
// RetryBudget and the Google SRE book's values.
const (
	BudgetRatio        = 0.2
	BudgetMinPerSecond = 10.0
	BudgetWindow       = 10 * time.Second
	ThrottleK          = 2.0
	ThrottleWindow     = 2 * time.Minute
)

// Budget returns a Process option set with a rebound.RetryBudget of its
// own per process (see rebound.NewRetryBudget).
func Budget(ratio, minPerSecond float64, window time.Duration) func(Env) []rebound.Option {
	return func(Env) []rebound.Option {
		b, err := rebound.NewRetryBudget(ratio, minPerSecond, window)
		if err != nil {
			panic(err) // values fixed by the strategy: a programming error
		}
		return []rebound.Option{rebound.WithBudget(b)}
	}
}

// Throttle returns a Process option set with a rebound.AdaptiveThrottle of
// its own per process, its draws seeded with the process's seed (see
// rebound.NewAdaptiveThrottle).
func Throttle(k float64, window time.Duration) func(Env) []rebound.Option {
	return func(e Env) []rebound.Option {
		t, err := rebound.NewAdaptiveThrottle(k, window, rand.NewPCG(e.Seed, e.Seed^0x9e3779b97f4a7c15))
		if err != nil {
			panic(err)
		}
		return []rebound.Option{rebound.WithThrottle(t)}
	}
}

// Limiter returns a Process option set with a rate.Limiter of its own per
// process.
func Limiter(limit rate.Limit, burst int) func(Env) []rebound.Option {
	return func(Env) []rebound.Option {
		return []rebound.Option{rebound.WithLimiter(rate.NewLimiter(limit, burst))}
	}
}

// Both combines Process option sets.
func Both(fs ...func(Env) []rebound.Option) func(Env) []rebound.Option {
	return func(e Env) []rebound.Option {
		var opts []rebound.Option
		for _, f := range fs {
			opts = append(opts, f(e)...)
		}
		return opts
	}
}

// DefaultInterval is the fixed retry interval, 5 s: the retry period of
// Dubbo's classic failback cluster.
const DefaultInterval = 5 * time.Second

// FleetMax is the fleet strategy's Max.
const FleetMax = 7 * time.Second

// Strategies returns the strategies compared by the storm example, in this
// order:
//
//	fixed-<interval>    NoJitter, Initial = Max = interval, Multiplier 1;
//	                    ignores Retry-After (Dubbo's failback)
//	full-jitter         the zero Policy, ignoring Retry-After: plain full
//	                    jitter, 1 s doubling to 30 s
//	rebound             rebound's defaults: the zero Policy, honouring
//	                    Retry-After
//	failback-default    failback.DefaultPolicy() (4 attempts: 3
//	                    retries, decorrelated jitter 5 s to 60 s), honouring
//	                    Retry-After
//	rebound+budget      and a rebound.RetryBudget per process
//	rebound+throttle    and a rebound.AdaptiveThrottle per process
//	rebound+budget+throttle
//	fleet               DecorrelatedJitter capped at FleetMax (7 s),
//	                    honouring Retry-After: the documented strategy for
//	                    fleets (see docs/storm.md)
//
// Budgets and throttles have rebound's defaults and are built per process;
// no process shares anything with another.
func Strategies(interval time.Duration) []Strategy {
	d := rebound.Policy{}
	return []Strategy{
		{Name: "fixed-" + interval.String(), Policy: rebound.Policy{
			Initial: interval, Multiplier: 1, Max: interval, Jitter: rebound.NoJitter}},
		{Name: "full-jitter", Policy: d},
		{Name: "rebound", Policy: d, HonorRetryAfter: true},
		{Name: "failback-default", Policy: failback.DefaultPolicy(), Limits: []rebound.Option{rebound.WithMaxAttempts(4)}, HonorRetryAfter: true},
		{Name: "rebound+budget", Policy: d, HonorRetryAfter: true, Process: Budget(BudgetRatio, BudgetMinPerSecond, BudgetWindow)},
		{Name: "rebound+throttle", Policy: d, HonorRetryAfter: true, Process: Throttle(ThrottleK, ThrottleWindow)},
		{Name: "rebound+budget+throttle", Policy: d, HonorRetryAfter: true, Process: Both(Budget(BudgetRatio, BudgetMinPerSecond, BudgetWindow), Throttle(ThrottleK, ThrottleWindow))},
		{Name: "fleet", Policy: rebound.Policy{Max: FleetMax, Jitter: rebound.DecorrelatedJitter}, HonorRetryAfter: true},
	}
}
