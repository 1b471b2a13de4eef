package reboundpg

// WithBatch caps the calls one claim takes, for the _test package.
func WithBatch(n int) Option { return withBatch(n) }
