package rebound

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rebound-go/rebound/internal/telemetry"
)

// WithMeterProvider records the loop's OpenTelemetry metrics with mp, each with attrs.
// A nil mp records nothing; if several are given, the last applies.
// It creates the instruments when called: build the option once.
func WithMeterProvider(mp metric.MeterProvider, attrs ...attribute.KeyValue) Option {
	if mp == nil {
		return nil
	}
	t, err := telemetry.NewRetry(mp, attrs...)
	if err != nil {
		return optionFunc(func(c *config) {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.WithMeterProvider", Arg: "mp",
				Reason: "could not create the instruments", Err: err})
		})
	}
	m := newRetryMeter(t)
	m.mp, m.attrs = mp, attrs
	return m // made once: Retry and NewRetrier use it as it is
}

// retryMeter records a loop's metrics: a listener per kind of event,
// called before those of WithObserver. mp and attrs are kept for the
// layers that record instruments of their own (internal/admit.Engine).
type retryMeter struct {
	on    listeners
	mp    metric.MeterProvider
	attrs []attribute.KeyValue
}

func newRetryMeter(t *telemetry.Retry) *retryMeter {
	m := &retryMeter{}
	m.on[EventAttempt] = func(e Event) { t.Attempted(e.Err, e.LimiterWait) }
	m.on[EventRetry] = func(e Event) { t.Retried(e.Delay) }
	m.on[EventThrottled] = func(Event) { t.Throttled() }
	m.on[EventGiveUp] = func(e Event) {
		if !e.Waiting {
			t.GaveUp() // one failed attempt that ended the loop
		}
	}
	return m
}

// apply makes m the loop's meter; if several are given, the last applies.
func (m *retryMeter) apply(c *config) { c.meter = m }
