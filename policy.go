package rebound

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Defaults taken by the zero fields of a Policy.
const (
	DefaultInitial    = 1 * time.Second
	DefaultMultiplier = 2.0
	DefaultMax        = 30 * time.Second

	// MinDelay is the floor of every delay a Policy's BackOff returns.
	// Full jitter draws from [0, ceiling]; a draw below MinDelay is raised to
	// it, so no configuration can turn a retry loop into a busy-spin.
	MinDelay = 500 * time.Microsecond
)

// Jitter selects how a delay is drawn below the exponential ceiling.
// The zero value is FullJitter.
type Jitter int

const (
	// FullJitter draws each delay uniformly from [0, ceiling(n)] (raised to
	// MinDelay). It spreads a crowd of clients best and does the least total
	// work; it is the default.
	FullJitter Jitter = iota
	// EqualJitter draws each delay uniformly from [ceiling(n)/2, ceiling(n)]:
	// never shorter than half the ceiling.
	EqualJitter
	// DecorrelatedJitter draws delay(n) uniformly from
	// [Initial, 3*delay(n-1)] and caps it at Max, with delay(-1) = Initial.
	// It ignores Multiplier.
	DecorrelatedJitter
	// NoJitter waits exactly ceiling(n). Clients that fail together retry
	// together: use it only for a single client or in simulations.
	NoJitter
)

func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case DecorrelatedJitter:
		return "decorrelated"
	case NoJitter:
		return "none"
	}
	return fmt.Sprintf("Jitter(%d)", int(j))
}

// Policy describes capped exponential backoff with jitter. It is a plain
// value: copy it freely, share it between goroutines, and build one BackOff
// per retry loop with NewBackOff.
//
// The zero Policy is usable and means: first ceiling 1 s, doubling, capped at
// 30 s, full jitter, unlimited attempts, no time limit.
//
// The ceiling of the n-th delay (n = 0 for the wait after the first failed
// attempt) is
//
//	ceiling(n) = min(Max, Initial * Multiplier^n)
//
// computed in floating point, so it never overflows (see Ceiling). The delay
// actually returned depends on Jitter; with the defaults the ceilings are
// 1s, 2s, 4s, 8s, 16s, 30s, 30s, ... and:
//
//	FullJitter          uniform [0, ceiling(n)], at least MinDelay
//	EqualJitter         uniform [ceiling(n)/2, ceiling(n)]
//	DecorrelatedJitter  min(Max, uniform [Initial, 3*previous delay])
//	NoJitter            exactly ceiling(n)
type Policy struct {
	// Initial is the ceiling of the first delay. 0 means DefaultInitial
	// (or Max, if Max is set below DefaultInitial). A positive value must
	// be at least MinDelay.
	Initial time.Duration
	// Multiplier is the growth of the ceiling per attempt. 0 means
	// DefaultMultiplier; otherwise it must be a finite number >= 1.
	Multiplier float64
	// Max caps every single delay. 0 means DefaultMax (or Initial, if
	// Initial is set above DefaultMax). It must not be less than Initial.
	Max time.Duration
	// Jitter selects how delays are drawn; the zero value is FullJitter.
	Jitter Jitter
	// MaxAttempts is the total number of attempts including the first;
	// 0 means unlimited. MaxAttempts 1 means no retry.
	MaxAttempts int
	// MaxElapsed bounds the time from the last Reset of a BackOff (for
	// Retry: from the start of the call) to the start of any attempt: the
	// BackOff returns backoff.Stop when the next delay would end past it.
	// 0 means unlimited.
	MaxElapsed time.Duration
}

// Validate reports every field that breaks its rule, as an error wrapping
// ErrInvalidPolicy that names the field, its value and the rule. The zero
// Policy is valid.
func (p Policy) Validate() error {
	// Fast path: the common valid cases do not allocate.
	if p.validFast() {
		return nil
	}
	var errs []error
	bad := func(field string, value any, rule string) {
		errs = append(errs, fmt.Errorf("%s = %v: %s", field, value, rule))
	}
	if p.Initial < 0 {
		bad("Initial", p.Initial, "must not be negative (0 means the default, 1s)")
	} else if p.Initial > 0 && p.Initial < MinDelay {
		bad("Initial", p.Initial, fmt.Sprintf("must be 0 (the default) or at least MinDelay (%v)", MinDelay))
	}
	if math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) {
		bad("Multiplier", p.Multiplier, "must be a finite number")
	} else if p.Multiplier != 0 && p.Multiplier < 1 {
		bad("Multiplier", p.Multiplier, "must be 0 (the default, 2) or at least 1")
	}
	if p.Max < 0 {
		bad("Max", p.Max, "must not be negative (0 means the default, 30s)")
	} else if p.Max > 0 && p.Max < MinDelay {
		bad("Max", p.Max, fmt.Sprintf("must be 0 (the default) or at least MinDelay (%v)", MinDelay))
	}
	if p.Initial > 0 && p.Max > 0 && p.Max < p.Initial {
		bad("Max", p.Max, fmt.Sprintf("must not be less than Initial (%v)", p.Initial))
	}
	if p.Jitter < FullJitter || p.Jitter > NoJitter {
		bad("Jitter", int(p.Jitter), "must be FullJitter, EqualJitter, DecorrelatedJitter or NoJitter")
	}
	if p.MaxAttempts < 0 {
		bad("MaxAttempts", p.MaxAttempts, "must not be negative (0 means unlimited)")
	}
	if p.MaxElapsed < 0 {
		bad("MaxElapsed", p.MaxElapsed, "must not be negative (0 means unlimited)")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidPolicy, errors.Join(errs...))
}

func (p Policy) validFast() bool {
	return (p.Initial == 0 || p.Initial >= MinDelay) &&
		(p.Multiplier == 0 || (p.Multiplier >= 1 && !math.IsInf(p.Multiplier, 1))) &&
		(p.Max == 0 || p.Max >= MinDelay) &&
		(p.Initial == 0 || p.Max == 0 || p.Max >= p.Initial) &&
		p.Jitter >= FullJitter && p.Jitter <= NoJitter &&
		p.MaxAttempts >= 0 && p.MaxElapsed >= 0
}

// Normalized returns the policy NewBackOff actually runs: every zero field
// replaced by its default, and every invalid field replaced by a safe value
// (never a panic, never a busy-spin):
//
//   - Initial and Max below MinDelay (zero or negative included) take their
//     defaults; a positive value below MinDelay is raised to MinDelay.
//   - A Multiplier that is NaN, infinite or below 1 takes DefaultMultiplier.
//   - Max below Initial is raised to Initial.
//   - An unknown Jitter becomes FullJitter.
//   - Negative MaxAttempts and MaxElapsed mean unlimited (0).
func (p Policy) Normalized() Policy {
	switch {
	case p.Initial > 0 && p.Initial < MinDelay:
		p.Initial = MinDelay
	case p.Initial <= 0:
		p.Initial = 0
	}
	switch {
	case p.Max > 0 && p.Max < MinDelay:
		p.Max = MinDelay
	case p.Max <= 0:
		p.Max = 0
	}
	switch {
	case p.Initial == 0 && p.Max == 0:
		p.Initial, p.Max = DefaultInitial, DefaultMax
	case p.Initial == 0:
		p.Initial = min(DefaultInitial, p.Max)
	case p.Max == 0:
		p.Max = max(DefaultMax, p.Initial)
	case p.Max < p.Initial:
		p.Max = p.Initial
	}
	if math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || p.Multiplier < 1 {
		p.Multiplier = DefaultMultiplier
	}
	if p.Jitter < FullJitter || p.Jitter > NoJitter {
		p.Jitter = FullJitter
	}
	if p.MaxAttempts < 0 {
		p.MaxAttempts = 0
	}
	if p.MaxElapsed < 0 {
		p.MaxElapsed = 0
	}
	return p
}

// Ceiling returns min(Max, Initial*Multiplier^n) of the normalized policy:
// the upper bound of the n-th delay (n = 0 is the wait after the first
// failure). It never overflows, for any n; a negative n counts as 0.
func (p Policy) Ceiling(n int) time.Duration {
	return p.Normalized().ceiling(n)
}

// ceiling assumes a normalized policy.
func (p Policy) ceiling(n int) time.Duration {
	if n <= 0 {
		return p.Initial
	}
	f := float64(p.Initial) * math.Pow(p.Multiplier, float64(n))
	// !(f < max) also catches +Inf and NaN.
	if !(f < float64(p.Max)) {
		return p.Max
	}
	return time.Duration(f)
}

// NewBackOff returns a fresh BackOff that follows the normalized policy
// (see Normalized), with its own random source. A BackOff is not safe for
// concurrent use: build one per loop. It returns backoff.Stop once
// MaxAttempts attempts have failed or when the next delay would end more
// than MaxElapsed after the last Reset (which NewBackOff performs).
//
// Options used: WithSeed (deterministic draws) and WithClock (the time
// MaxElapsed is measured with); others are ignored.
func (p Policy) NewBackOff(opts ...Option) backoff.BackOff {
	if len(opts) == 0 {
		var c config // stays on the stack
		return newPolicyBackOff(p, &c)
	}
	return newPolicyBackOff(p, newConfig(opts))
}

func newPolicyBackOff(p Policy, c *config) *policyBackOff {
	b := &policyBackOff{p: p.Normalized(), clock: c.clock}
	var s1, s2 uint64
	if c.seeded {
		s1, s2 = c.seed, c.seed^0x9e3779b97f4a7c15
	} else {
		s1, s2 = rand.Uint64(), rand.Uint64()
	}
	b.pcg.Seed(s1, s2)
	b.rnd = rand.New(&b.pcg)
	b.Reset()
	return b
}

// policyBackOff implements backoff.BackOff for a normalized Policy.
type policyBackOff struct {
	p     Policy
	clock backoff.Clock // nil: time.Now
	pcg   rand.PCG
	rnd   *rand.Rand
	n     int           // NextBackOff calls since Reset = failed attempts
	prev  time.Duration // previous delay (DecorrelatedJitter)
	start time.Time
}

func (b *policyBackOff) now() time.Time {
	if b.clock != nil {
		return b.clock.Now()
	}
	return time.Now()
}

// Reset restarts the sequence and the MaxElapsed clock.
func (b *policyBackOff) Reset() {
	b.n = 0
	b.prev = b.p.Initial
	if b.p.MaxElapsed > 0 {
		b.start = b.now()
	}
}

// NextBackOff returns the delay before the next attempt, or backoff.Stop.
func (b *policyBackOff) NextBackOff() time.Duration {
	b.n++
	if b.p.MaxAttempts > 0 && b.n >= b.p.MaxAttempts {
		return backoff.Stop
	}
	d := b.draw(b.n - 1)
	if b.p.MaxElapsed > 0 && b.now().Sub(b.start)+d > b.p.MaxElapsed {
		return backoff.Stop
	}
	return d
}

// draw returns the n-th delay (n from 0), always in [MinDelay, Max].
func (b *policyBackOff) draw(n int) time.Duration {
	var d time.Duration
	switch b.p.Jitter {
	case NoJitter:
		d = b.p.ceiling(n)
	case EqualJitter:
		c := b.p.ceiling(n)
		d = c/2 + b.uniform(0, c-c/2)
	case DecorrelatedJitter:
		// min(Max, uniform[Initial, 3*prev]); 3*prev saturates instead
		// of overflowing.
		hi := time.Duration(math.MaxInt64)
		if b.prev <= math.MaxInt64/3 {
			hi = b.prev * 3
		}
		d = min(b.p.Max, b.uniform(b.p.Initial, max(hi, b.p.Initial)))
		b.prev = d
	default: // FullJitter
		d = b.uniform(0, b.p.ceiling(n))
	}
	return max(d, MinDelay)
}

// uniform returns a duration drawn uniformly from [lo, hi]; lo <= hi, and
// hi-lo < MaxInt64 because lo >= 0 and hi <= Max.
func (b *policyBackOff) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return lo + time.Duration(b.rnd.Uint64()>>1)
	}
	return lo + time.Duration(b.rnd.Uint64N(span+1))
}
