package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Breaker instrument names.
const (
	BreakerTargets     = "rebound.breaker.targets"
	BreakerTransitions = "rebound.breaker.transitions"
)

// BreakerStateNames are the state attribute values, in gobreaker's State
// order (closed, half-open, open).
var BreakerStateNames = [3]string{"closed", "half_open", "open"}

// BreakerCounts is what a cluster.BreakerDirectory reports when the reader
// collects: its breakers per state now, and the transitions into each
// state so far (indexed like BreakerStateNames).
type BreakerCounts struct {
	States      [3]int64
	Transitions [3]int64
}

// Breaker reports a cluster.BreakerDirectory's instruments, both
// observable: rebound.breaker.targets{state} (an up-down counter: breakers
// per state, so two directories on one provider add up) and
// rebound.breaker.transitions{state} (a counter: state changes, by the
// state entered). A nil *Breaker does nothing.
type Breaker struct{ reg metric.Registration }

// NewBreaker registers the breaker instruments on mp, read from counts when
// the reader collects. A nil mp returns nil, nil.
func NewBreaker(mp metric.MeterProvider, counts func() BreakerCounts) (*Breaker, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	targets, err := m.Int64ObservableUpDownCounter(BreakerTargets, metric.WithUnit("{target}"),
		metric.WithDescription("Per-target circuit breakers, by state: closed, half_open, open."))
	if err != nil {
		return nil, err
	}
	trans, err := m.Int64ObservableCounter(BreakerTransitions, metric.WithUnit("{transition}"),
		metric.WithDescription("Per-target circuit breaker state changes, by the state entered."))
	if err != nil {
		return nil, err
	}
	var obs [3]metric.ObserveOption
	for i, n := range BreakerStateNames {
		obs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", n)))
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := counts()
		for i := range obs {
			o.ObserveInt64(targets, c.States[i], obs[i])
			o.ObserveInt64(trans, c.Transitions[i], obs[i])
		}
		return nil
	}, targets, trans)
	if err != nil {
		return nil, err
	}
	return &Breaker{reg: reg}, nil
}

// Close unregisters the callback.
func (b *Breaker) Close() error {
	if b == nil || b.reg == nil {
		return nil
	}
	return b.reg.Unregister()
}
