package rebound

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rebound-go/rebound/internal/telemetry"
)

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
