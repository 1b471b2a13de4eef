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
//     adapter's Sink.Confirmed, whatever its words), counted by an
//     observer of the Manager's events (see Hooks), called before those of
//     WithObserver, so every event is counted;
//   - rebound.retry.attempts, rebound.retry.delay and rebound.limiter.wait
//     with component=subscriber, from the subscriptions' retry loops.
//
// Close unregisters them. Default (and for nil): no metrics; no global
// MeterProvider is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return managerOption("WithMeterProvider", func(o *options) { o.meterProvider = mp })
}

// retryMetrics is the Retrier option for the subscriptions' loops (nil
// without WithMeterProvider).
func (o *options) retryMetrics() rebound.Option {
	return rebound.WithMeterProvider(o.meterProvider, attribute.String("component", "subscriber"))
}

// startMetrics registers the Manager's instruments and adds the observer
// that counts updates and confirmations (New calls it before any event).
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
	m.observers = append(m.observers, subscriberMeter{t}) // first: before the observers of WithObserver
	return nil
}

// subscriberMeter is the observer that counts updates and confirmations.
type subscriberMeter struct{ t *telemetry.Subscriber }

func (sm subscriberMeter) Observe(e rebound.Event) {
	switch d := e.Detail.(type) {
	case Delivery:
		sm.t.Updated(updateResult(d.Result))
	case Confirmation:
		// The attribute is one of two values; the adapter's own words
		// (d.Reason) are free text, for Status, observers and logs only.
		kind := telemetry.ConfirmSubscribe
		if d.evidence {
			kind = telemetry.ConfirmEvidence
		}
		sm.t.Confirmed(kind)
	}
}

func updateResult(r string) telemetry.Update {
	switch r {
	case resDuplicate:
		return telemetry.UpdateDuplicate
	case resEmptyHeld:
		return telemetry.UpdateEmptyHeld
	case resStale:
		return telemetry.UpdateStale
	}
	return telemetry.UpdateDelivered
}
