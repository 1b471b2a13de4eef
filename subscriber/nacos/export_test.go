package nacos

import "github.com/rebound-go/rebound/subscriber"

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

// QueryOpen reports whether the hub of g (a Registration of Register)
// holds its query connection open.
func QueryOpen(g interface{ Key() subscriber.Key }) bool {
	h := g.(*registration).h
	h.qmu.Lock()
	defer h.qmu.Unlock()
	return h.query != nil
}
