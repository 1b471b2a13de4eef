package cluster

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// WithErrorHandler makes a RegistryDirectory call fn with each dial and
// close error it logs, for the tests that check what is reported.
func WithErrorHandler(fn func(error)) Option {
	return dirOption("WithErrorHandler", func(c *dirConfig) { c.errorHandler = fn })
}

// DialError is the error logged for an instance that could not be dialled.
type DialError = dialError

// WithConsecutiveFailures, WithOpenTimeout and WithBreakerClassifier set
// the directory's defaults of the Settings' ReadyToTrip, Timeout and
// IsSuccessful: the tests' short form of WithBreakerSettings. Values are
// not checked.
// defaultSettings is the factory of WithBreakerSettings that keeps the
// defaults (for its observers).
func defaultSettings(string) gobreaker.Settings { return gobreaker.Settings{} }

func WithConsecutiveFailures(n int) Option {
	return breakerOption("WithConsecutiveFailures", func(c *breakerConfig) { c.failures = uint32(n) })
}

func WithOpenTimeout(d time.Duration) Option {
	return breakerOption("WithOpenTimeout", func(c *breakerConfig) { c.timeout = d })
}

func WithBreakerClassifier(failure func(error) bool) Option {
	return breakerOption("WithBreakerClassifier", func(c *breakerConfig) { c.failure, c.customFailure = failure, true })
}
