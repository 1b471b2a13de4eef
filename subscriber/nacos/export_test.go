package nacos

// Unexported names the external tests use.
var (
	ErrClosed            = errClosed
	ErrNotConnected      = errNotConnected
	ErrNoEvidence        = errNoEvidence
	ErrConflict          = errConflict
	ErrNotListed         = errNotListed
	ErrInvalidKey        = errInvalidKey
	ErrLookupUnsupported = errLookupUnsupported
)

// Options the tests use to run faster or to turn a timer off; users get
// the defaults (docs/providers.md, docs/subscription.md).
var (
	WithRedoGrace      = withRedoGrace
	WithCheckInterval  = withCheckInterval
	WithEvidenceWindow = withEvidenceWindow
)
