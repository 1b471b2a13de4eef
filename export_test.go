package rebound

import "github.com/cenkalti/backoff/v4"

// The time seams, exported to the package's external tests only.
var WithClock = withClock

func WithTimer(newTimer func() backoff.Timer) Option {
	return withTimer(func() timer { return newTimer() })
}
