package nacos

// Unexported names the external tests use.
var (
	ErrClosed       = errClosed
	ErrNotConnected = errNotConnected
)

var ErrNoEvidence = errNoEvidence
