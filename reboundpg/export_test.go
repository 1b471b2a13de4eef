package reboundpg

// WithBatch caps the calls one claim takes, for the _test package.
func WithBatch(n int) Option { return withBatch(n) }

// Options the package keeps at their defaults; the tests set them.
var (
	WithPollInterval = withPollInterval
	WithRetention    = withRetention
)
