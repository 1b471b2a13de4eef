package failback

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// WithMeterProvider records the invoker's metrics with mp:
// rebound.failback.queue and rebound.failback.calls, read from Stats when
// collected, and the engine's retry metrics with component=failback. Default
// (and for nil): no metrics, no global provider (see docs/observability.md).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meterProvider = mp })
}

// retryMetrics is the Retrier option for the tasks' retries (nil without
// WithMeterProvider).
func (c *config) retryMetrics() rebound.Option {
	return rebound.WithMeterProvider(c.meterProvider, attribute.String("component", "failback"))
}

// startMetrics registers the invoker's instruments (New calls it).
func (f *Invoker) startMetrics() error {
	m, err := telemetry.NewFailback(f.cfg.meterProvider, func() telemetry.FailbackStats {
		st := f.Stats()
		var dropped uint64
		for _, n := range st.Dropped {
			dropped += n
		}
		return telemetry.FailbackStats{Queue: int64(st.Queued + st.InFlight),
			Succeeded: int64(st.Succeeded), GaveUp: int64(st.GaveUp), Dropped: int64(dropped)}
	})
	f.metrics = m
	return err
}
