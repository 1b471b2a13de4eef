package rebound

import "time"

// limits are when a loop stops: the part of a retry loop a Policy leaves out.
type limits struct {
	maxAttempts int           // 0: unlimited
	maxElapsed  time.Duration // 0: unlimited
}

// maxAttempts and maxElapsed are the Options of WithMaxAttempts and
// WithMaxElapsed: plain values, so Retry's fast path recognises them.
type (
	maxAttempts int
	maxElapsed  time.Duration
)

func (n maxAttempts) apply(c *config) {
	if n < 0 {
		c.bad("WithMaxAttempts", "n", "must not be negative (0 means unlimited)")
		return
	}
	c.maxAttempts = int(n)
}

func (d maxElapsed) apply(c *config) {
	if d < 0 {
		c.bad("WithMaxElapsed", "d", "must not be negative (0 means unlimited)")
		return
	}
	c.maxElapsed = time.Duration(d)
}

// WithMaxAttempts stops a loop after n attempts, the first included.
// 1 means no retry; 0, the default, means unlimited.
// A negative n is an *ArgumentError.
func WithMaxAttempts(n int) Option { return maxAttempts(n) }

// WithMaxElapsed bounds the time from a loop's start to any attempt's start.
// A loop stops rather than wait past it; 0, the default, means unlimited.
// A negative d is an *ArgumentError.
func WithMaxElapsed(d time.Duration) Option { return maxElapsed(d) }
