package cluster

// WithErrorHandler makes a RegistryDirectory call fn with each dial and
// close error it logs, for the tests that check what is reported.
func WithErrorHandler(fn func(error)) Option {
	return dirOption("WithErrorHandler", func(c *dirConfig) { c.errorHandler = fn })
}

// DialError is the error logged for an instance that could not be dialled.
type DialError = dialError
