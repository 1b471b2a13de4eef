package reboundgrpc

import (
	"github.com/rebound-go/rebound"
	"google.golang.org/grpc/metadata"
	"time"
)

// Names the tests use; the package does not export them.

// Stats is the Builder's counters.
type Stats = stats

// Stats returns the Builder's counters.
func (b *Builder) Stats() Stats { return b.stats() }

var (
	WithLinger             = withLinger
	WithResolveNowInterval = withResolveNowInterval
	WithUnresolvedReport   = withUnresolvedReport
	ParseTarget            = parseTarget
	ErrNoInstances         = errNoInstances
	ErrUnresolved          = errUnresolved
)

const (
	WeightScale      = weightScale
	PushbackTrailer  = pushbackTrailer
	DefaultDrainWait = defaultDrainWait
)

// Pushback returns the delay of a valid pushback trailer.
func Pushback(trailer metadata.MD) (time.Duration, bool) {
	d, present, retry := pushback(trailer)
	return d, present && retry
}

// Retryable reports whether Classify marks err transient.
func Retryable(err error) bool {
	if err == nil || rebound.IsPermanent(err) {
		return false
	}
	if rebound.IsTransient(err) {
		return true
	}
	return rebound.IsTransient(Classify(err, nil))
}
