package rebound

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// The defaults of a Policy's zero fields.
const (
	defaultInitial       = 1 * time.Second
	defaultMultiplier    = 2.0
	defaultMax           = 30 * time.Second
	defaultMaxRetryAfter = 5 * time.Minute
)

// minDelay is the floor of every delay a Policy yields (stated on Policy):
// a draw below it is raised to it, so no loop can busy-spin.
const minDelay = 500 * time.Microsecond

// Jitter selects how a delay is drawn below the ceiling.
// The zero value is FullJitter.
type Jitter int

const (
	// FullJitter draws from [0, ceiling(n)].
	// It is the default.
	FullJitter Jitter = iota
	// EqualJitter draws from [ceiling(n)/2, ceiling(n)].
	EqualJitter
	// DecorrelatedJitter draws from [Initial, 3×previous delay], capped at Max.
	// It ignores Multiplier.
	DecorrelatedJitter
	// NoJitter waits exactly ceiling(n).
	// Clients that fail together then retry together.
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

// Policy is capped exponential backoff with jitter: it only paces.
// The n-th delay's ceiling is min(Max, Initial×Multiplier^n), n from 0 (docs/policy.md).
// Every delay is at least 500 µs, so no loop can busy-spin.
// When to stop is an Option: WithMaxAttempts, WithMaxElapsed.
// It is a plain value; the zero Policy is valid and means the same in every package.
type Policy struct {
	// Initial is the first ceiling: 0 means 1 s, or Max if smaller.
	// Otherwise it must be at least 500 µs.
	Initial time.Duration
	// Multiplier is the ceiling's growth per attempt: 0 means 2.
	// Otherwise it must be a finite number >= 1.
	Multiplier float64
	// Max caps every delay: 0 means 30 s, or Initial if larger.
	// Otherwise it must be at least 500 µs, and not less than Initial.
	Max time.Duration
	// Jitter selects how delays are drawn.
	Jitter Jitter
	// MaxRetryAfter caps a server's Retry-After (see RetryAfter).
	// 0 means 5 min, or Max if larger.
	MaxRetryAfter time.Duration
}

// validate returns an error wrapping errInvalidPolicy (matching
// ErrInvalidArgument) for a bad policy (NewRetrier's). It names every bad
// field, its value and the rule.
func (p Policy) validate() error {
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
	} else if p.Initial > 0 && p.Initial < minDelay {
		bad("Initial", p.Initial, fmt.Sprintf("must be 0 (the default) or at least %v, the floor of every delay", minDelay))
	}
	if math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) {
		bad("Multiplier", p.Multiplier, "must be a finite number")
	} else if p.Multiplier != 0 && p.Multiplier < 1 {
		bad("Multiplier", p.Multiplier, "must be 0 (the default, 2) or at least 1")
	}
	if p.Max < 0 {
		bad("Max", p.Max, "must not be negative (0 means the default, 30s)")
	} else if p.Max > 0 && p.Max < minDelay {
		bad("Max", p.Max, fmt.Sprintf("must be 0 (the default) or at least %v, the floor of every delay", minDelay))
	}
	if p.Initial > 0 && p.Max > 0 && p.Max < p.Initial {
		bad("Max", p.Max, fmt.Sprintf("must not be less than Initial (%v)", p.Initial))
	}
	if p.Jitter < FullJitter || p.Jitter > NoJitter {
		bad("Jitter", int(p.Jitter), "must be FullJitter, EqualJitter, DecorrelatedJitter or NoJitter")
	}
	if p.MaxRetryAfter < 0 {
		bad("MaxRetryAfter", p.MaxRetryAfter, "must not be negative (0 means the default, 5m0s)")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", errInvalidPolicy, errors.Join(errs...))
}

func (p Policy) validFast() bool {
	return (p.Initial == 0 || p.Initial >= minDelay) &&
		(p.Multiplier == 0 || (p.Multiplier >= 1 && !math.IsInf(p.Multiplier, 1))) &&
		(p.Max == 0 || p.Max >= minDelay) &&
		(p.Initial == 0 || p.Max == 0 || p.Max >= p.Initial) &&
		p.Jitter >= FullJitter && p.Jitter <= NoJitter &&
		p.MaxRetryAfter >= 0
}

// normalized returns the policy a loop runs.
// Each zero field takes its default and each bad field a safe value.
// It never yields a busy-spin (docs/policy.md lists the rules).
func (p Policy) normalized() Policy {
	switch {
	case p.Initial > 0 && p.Initial < minDelay:
		p.Initial = minDelay
	case p.Initial <= 0:
		p.Initial = 0
	}
	switch {
	case p.Max > 0 && p.Max < minDelay:
		p.Max = minDelay
	case p.Max <= 0:
		p.Max = 0
	}
	switch {
	case p.Initial == 0 && p.Max == 0:
		p.Initial, p.Max = defaultInitial, defaultMax
	case p.Initial == 0:
		p.Initial = min(defaultInitial, p.Max)
	case p.Max == 0:
		p.Max = max(defaultMax, p.Initial)
	case p.Max < p.Initial:
		p.Max = p.Initial
	}
	if math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || p.Multiplier < 1 {
		p.Multiplier = defaultMultiplier
	}
	if p.Jitter < FullJitter || p.Jitter > NoJitter {
		p.Jitter = FullJitter
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = max(defaultMaxRetryAfter, p.Max)
	}
	return p
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

// drawer draws the delays of one loop from a normalized policy: the one
// piece of backoff arithmetic in rebound, shared by BackOff and Schedule.
// Not safe for concurrent use.
type drawer struct {
	p    Policy // normalized
	pcg  rand.PCG
	prev time.Duration // previous delay (DecorrelatedJitter)
}

// seedFrom seeds the drawer: with seed when seeded, else at random.
func (d *drawer) seedFrom(p Policy, seed uint64, seeded bool) {
	d.p = p
	if seeded {
		d.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	} else {
		d.pcg.Seed(rand.Uint64(), rand.Uint64())
	}
	d.reset()
}

func (d *drawer) reset() { d.prev = d.p.Initial }

// draw returns the n-th delay (n from 0), always in [minDelay, Max].
func (d *drawer) draw(n int) time.Duration {
	var v time.Duration
	switch d.p.Jitter {
	case NoJitter:
		v = d.p.ceiling(n)
	case EqualJitter:
		c := d.p.ceiling(n)
		v = c/2 + d.uniform(0, c-c/2)
	case DecorrelatedJitter:
		// min(Max, uniform[Initial, 3*prev]); 3*prev saturates instead
		// of overflowing.
		hi := time.Duration(math.MaxInt64)
		if d.prev <= math.MaxInt64/3 {
			hi = d.prev * 3
		}
		v = min(d.p.Max, d.uniform(d.p.Initial, max(hi, d.p.Initial)))
		d.prev = v
	default: // FullJitter
		v = d.uniform(0, d.p.ceiling(n))
	}
	return max(v, minDelay)
}

// uniform returns a duration drawn uniformly from [lo, hi]; lo <= hi, and
// hi-lo < MaxInt64 because lo >= 0 and hi <= Max.
func (d *drawer) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return lo + time.Duration(d.pcg.Uint64()>>1)
	}
	return lo + time.Duration(d.uint64n(span+1))
}

// uint64n is math/rand/v2's Rand.Uint64N (64-bit platforms) over the PCG,
// without the *rand.Rand (and its allocation): the same draws for the same
// seed, so seeded sequences did not change when the drawer replaced it.
func (d *drawer) uint64n(n uint64) uint64 {
	if n&(n-1) == 0 { // a power of two: mask
		return d.pcg.Uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(d.pcg.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(d.pcg.Uint64(), n)
		}
	}
	return hi
}
