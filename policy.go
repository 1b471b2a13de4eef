package rebound

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
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

	// DefaultMaxRetryAfter is the largest Retry-After a loop honours when
	// Policy.MaxRetryAfter is 0 (or Max, if Max is larger): a server's
	// longer instruction is clamped to it. Envoy discards rate-limit
	// headers beyond the same 300 s; rebound clamps instead, so that the
	// wait is still at least as long as the formula's and the server's
	// intent ("much later") survives.
	DefaultMaxRetryAfter = 5 * time.Minute
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
// value: copy it freely, share it between goroutines, and build one
// Schedule (through a Retrier) or one BackOff (NewBackOff) per retry loop.
//
// The zero Policy is usable and means the same in every package of
// rebound: first ceiling 1 s, doubling, capped at 30 s, full jitter,
// unlimited attempts, no time limit, Retry-After honoured up to 5 min.
//
// Invalid policies: Retry, NewRetrier (and the constructors of rebound's
// other packages) reject a policy that breaks a rule of Validate, with an
// error naming the field and the rule, before anything runs. NewBackOff has
// no error return (it is a cenkalti/backoff building block, like
// backoff.NewExponentialBackOff): it runs the Normalized policy instead,
// which never panics and never spins. Validate first when the policy comes
// from configuration.
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
	// MaxElapsed bounds the time from the start of a loop (the start of
	// the Retry call, Schedule.Reset, or the last Reset of a BackOff) to
	// the START of any attempt: a loop stops, rather than wait, when the
	// next attempt would start after start+MaxElapsed, limiter wait and
	// Retry-After included. 0 means unlimited.
	MaxElapsed time.Duration
	// MaxRetryAfter caps a server's Retry-After (see RetryAfter): a longer
	// one is clamped to MaxRetryAfter, so that "Retry-After: 4294967295"
	// cannot pin a loop or a queue slot for 136 years. 0 means
	// DefaultMaxRetryAfter (5 min), or Max if Max is larger.
	MaxRetryAfter time.Duration
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
	if p.MaxRetryAfter < 0 {
		bad("MaxRetryAfter", p.MaxRetryAfter, "must not be negative (0 means the default, 5m0s)")
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
		p.MaxAttempts >= 0 && p.MaxElapsed >= 0 && p.MaxRetryAfter >= 0
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
//   - MaxRetryAfter 0 or negative takes max(DefaultMaxRetryAfter, Max).
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
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = max(DefaultMaxRetryAfter, p.Max)
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
// A BackOff knows nothing of Retry-After, limiters or budgets: loops that
// need those use a Schedule (Retrier.NewSchedule), which draws the same
// delays.
//
// Options used: WithSeed (deterministic draws); others are ignored.
func (p Policy) NewBackOff(opts ...Option) backoff.BackOff {
	if len(opts) == 0 {
		var c config // stays on the stack
		return newPolicyBackOff(p, &c)
	}
	return newPolicyBackOff(p, newConfig(opts))
}

func newPolicyBackOff(p Policy, c *config) *policyBackOff {
	b := &policyBackOff{clock: c.clock}
	b.d.init(p.Normalized(), c.seed, c.seeded)
	b.Reset()
	return b
}

// policyBackOff implements backoff.BackOff for a normalized Policy.
type policyBackOff struct {
	d     drawer
	clock backoff.Clock // nil: time.Now
	n     int           // NextBackOff calls since Reset = failed attempts
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
	b.d.reset()
	if b.d.p.MaxElapsed > 0 {
		b.start = b.now()
	}
}

// NextBackOff returns the delay before the next attempt, or backoff.Stop.
func (b *policyBackOff) NextBackOff() time.Duration {
	b.n++
	if b.d.p.MaxAttempts > 0 && b.n >= b.d.p.MaxAttempts {
		return backoff.Stop
	}
	d := b.d.draw(b.n - 1)
	// d > MaxElapsed-elapsed, not elapsed+d > MaxElapsed: the sum of a
	// delay near Max and the elapsed time would overflow and wrap negative.
	if b.d.p.MaxElapsed > 0 && d > b.d.p.MaxElapsed-max(b.now().Sub(b.start), 0) {
		return backoff.Stop
	}
	return d
}

// drawer draws the delays of one loop from a normalized policy: the one
// piece of backoff arithmetic in rebound, shared by BackOff and Schedule.
// Not safe for concurrent use.
type drawer struct {
	p    Policy // normalized
	pcg  rand.PCG
	prev time.Duration // previous delay (DecorrelatedJitter)
}

// init seeds the drawer: with seed when seeded, else at random.
func (d *drawer) init(p Policy, seed uint64, seeded bool) {
	d.p = p
	if seeded {
		d.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	} else {
		d.pcg.Seed(rand.Uint64(), rand.Uint64())
	}
	d.reset()
}

func (d *drawer) reset() { d.prev = d.p.Initial }

// draw returns the n-th delay (n from 0), always in [MinDelay, Max].
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
	return max(v, MinDelay)
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
