package rebound

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// NewBackOff returns a cenkalti/backoff BackOff that runs p with its
// defaults, each bad field replaced by a safe value (docs/policy.md).
// Only WithMaxAttempts and WithMaxElapsed apply; a bad limit means none.
// It ignores Retry-After and is not safe for concurrent use: build one per loop.
func (p Policy) NewBackOff(opts ...Option) backoff.BackOff {
	if len(opts) == 0 {
		var c config // stays on the stack
		return newPolicyBackOff(p, &c)
	}
	return newPolicyBackOff(p, newConfig(opts))
}

func newPolicyBackOff(p Policy, c *config) *policyBackOff {
	b := &policyBackOff{clock: c.clock, maxAttempts: max(c.maxAttempts, 0), maxElapsed: max(c.maxElapsed, 0)}
	b.d.seedFrom(p.normalized(), c.seed, c.seeded)
	b.Reset()
	return b
}

// policyBackOff implements backoff.BackOff for a normalized Policy.
type policyBackOff struct {
	d           drawer
	clock       backoff.Clock // nil: time.Now
	n           int           // NextBackOff calls since Reset = failed attempts
	start       time.Time
	maxAttempts int
	maxElapsed  time.Duration
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
	if b.maxElapsed > 0 {
		b.start = b.now()
	}
}

// NextBackOff returns the delay before the next attempt, or backoff.Stop.
func (b *policyBackOff) NextBackOff() time.Duration {
	b.n++
	if b.maxAttempts > 0 && b.n >= b.maxAttempts {
		return backoff.Stop
	}
	d := b.d.draw(b.n - 1)
	// d > MaxElapsed-elapsed, not elapsed+d > MaxElapsed: the sum of a
	// delay near Max and the elapsed time would overflow and wrap negative.
	if b.maxElapsed > 0 && d > b.maxElapsed-max(b.now().Sub(b.start), 0) {
		return backoff.Stop
	}
	return d
}
