package sim

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Defaults of the strategies built by Strategies.
const (
	// DefaultInterval is the fixed retry interval, 5 s: the retry period
	// of Dubbo's classic failback cluster.
	DefaultInterval = 5 * time.Second
	// DefaultLimit is the shared limiter's rate: 250 retries/s, half the
	// default server capacity, leaving room for fresh traffic.
	DefaultLimit rate.Limit = 250
	// DefaultBurst is the shared limiter's burst: 25, one 100 ms window
	// at DefaultLimit, so limiter and burst together never exceed the
	// default capacity of 50 calls per window.
	DefaultBurst = 25
)

// Strategies returns the strategies compared by the storm example, in this
// order:
//
//	fixed-<interval>  NoJitter, Initial = Max = interval, Multiplier 1
//	exponential       NoJitter, rebound defaults: 1 s doubling, capped at 30 s
//	full-jitter       FullJitter, rebound defaults (the zero Policy)
//	equal-jitter      EqualJitter, rebound defaults
//	decorrelated      DecorrelatedJitter, rebound defaults (1 s .. 30 s)
//
// followed, when limit > 0, by the same five with "+limiter" appended to
// the name, sharing one rate.Limiter(limit, burst) per run. The exponential
// strategies use rebound's default Policy on purpose: that is what a user
// who writes rebound.Policy{} gets.
func Strategies(interval time.Duration, limit rate.Limit, burst int) []Strategy {
	base := []Strategy{
		{Name: "fixed-" + interval.String(), Policy: rebound.Policy{
			Initial: interval, Multiplier: 1, Max: interval, Jitter: rebound.NoJitter}},
		{Name: "exponential", Policy: rebound.Policy{Jitter: rebound.NoJitter}},
		{Name: "full-jitter", Policy: rebound.Policy{Jitter: rebound.FullJitter}},
		{Name: "equal-jitter", Policy: rebound.Policy{Jitter: rebound.EqualJitter}},
		{Name: "decorrelated", Policy: rebound.Policy{Jitter: rebound.DecorrelatedJitter}},
	}
	if limit <= 0 {
		return base
	}
	all := append(make([]Strategy, 0, 2*len(base)), base...)
	for _, s := range base {
		s.Name += "+limiter"
		s.Limit, s.Burst = limit, burst
		all = append(all, s)
	}
	return all
}
