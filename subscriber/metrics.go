package subscriber

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// WithMeterProvider records the Manager's OpenTelemetry metrics with mp
// (see docs/observability.md), on the meter "github.com/rebound-go/rebound":
//
//   - rebound.subscriber.subscriptions{state}: subscriptions by state
//     (every state is reported, also at 0, from the first collection on;
//     stopped counts those Status retains), read from Counts;
//   - rebound.subscriber.registry.connected: 1 while the registry client
//     reports a connection, 0 while it reports none; not reported if the
//     Registry is no ConnectionMonitor or has reported nothing yet;
//   - rebound.subscriber.updates{result=delivered|duplicate|empty_held|stale}
//     and rebound.subscriber.confirmations{reason=subscribe|evidence}
//     (subscribe: an acknowledged Registry.Subscribe; evidence: the
//     adapter's Sink.Confirmed, whatever its words), counted from the
//     Manager's hook events (see Hooks: never under a lock, never on a
//     subscription's goroutine; events dropped by a full hook queue are
//     not counted, Counts.DroppedEvents says how many);
//   - rebound.retry.attempts, rebound.retry.delay and rebound.limiter.wait
//     with component=subscriber, from the subscriptions' retry loops.
//
// Close unregisters them. Default (and for nil): no metrics; no global
// MeterProvider is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meterProvider = mp })
}

// retryMetrics is the Retrier option for the subscriptions' loops (nil
// without WithMeterProvider).
func (o *options) retryMetrics() rebound.Option {
	return rebound.WithMeterProvider(o.meterProvider, attribute.String("component", "subscriber"))
}

// startMetrics registers the Manager's instruments and adds the hooks
// that count updates and confirmations to o.hooks (New calls it before
// the hook dispatcher starts).
func (m *Manager) startMetrics(o *options) error {
	t, err := telemetry.NewSubscriber(o.meterProvider, func() telemetry.SubscriberCounts {
		c := m.Counts()
		tc := telemetry.SubscriberCounts{Connected: -1, States: [5]int64{
			int64(c.ByState[StatePending]), int64(c.ByState[StateSubscribed]),
			int64(c.ByState[StateRetrying]), int64(c.ByState[StateStopped]), int64(c.ByState[StateHeld])}}
		switch c.Connection {
		case Connected:
			tc.Connected = 1
		case Disconnected:
			tc.Connected = 0
		}
		return tc
	})
	if err != nil || t == nil {
		return err
	}
	m.metrics = t
	delivered, confirmed := o.hooks.Delivered, o.hooks.Confirmed
	o.hooks.Delivered = func(d Delivery) {
		t.Updated(updateResult(d.Result))
		if delivered != nil {
			delivered(d)
		}
	}
	o.hooks.Confirmed = func(c Confirmation) {
		// The attribute is one of two values; the adapter's own words
		// (c.Reason) are free text, for Status, hooks and logs only.
		kind := telemetry.ConfirmSubscribe
		if c.evidence {
			kind = telemetry.ConfirmEvidence
		}
		t.Confirmed(kind)
		if confirmed != nil {
			confirmed(c)
		}
	}
	return nil
}

func updateResult(r DeliveryResult) telemetry.Update {
	switch r {
	case Duplicate:
		return telemetry.UpdateDuplicate
	case EmptyHeld:
		return telemetry.UpdateEmptyHeld
	case Stale:
		return telemetry.UpdateStale
	}
	return telemetry.UpdateDelivered
}
