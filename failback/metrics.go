package failback

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// retryMetrics is the Retrier option for the tasks' retries (nil without
// a rebound.WithMeterProvider in WithPolicy): its attributes and
// component=failback.
func (c *config) retryMetrics() rebound.Option {
	if c.meterProvider == nil {
		return nil
	}
	attrs := append(c.meterAttrs[:len(c.meterAttrs):len(c.meterAttrs)], attribute.String("component", "failback"))
	return rebound.WithMeterProvider(c.meterProvider, attrs...)
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
