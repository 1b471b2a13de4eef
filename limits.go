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
