package subscriber

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// retryMetrics is the Retrier option for the subscriptions' loops (nil
// without a rebound.WithMeterProvider in WithPolicy): its attributes and
// component=subscriber.
func (o *options) retryMetrics() rebound.Option {
	if o.meterProvider == nil {
		return nil
	}
	attrs := append(o.meterAttrs[:len(o.meterAttrs):len(o.meterAttrs)], attribute.String("component", "subscriber"))
	return rebound.WithMeterProvider(o.meterProvider, attrs...)
}

// startMetrics registers the Manager's instruments and adds the observer
// that counts updates and confirmations (New calls it before any event).
func (m *Manager) startMetrics(o *options) error {
	t, err := telemetry.NewSubscriber(o.meterProvider, func() telemetry.SubscriberCounts {
		c := m.counts()
		tc := telemetry.SubscriberCounts{Connected: -1, States: [5]int64{
			int64(c.ByState[StatePending]), int64(c.ByState[StateSubscribed]),
			int64(c.ByState[StateRetrying]), int64(c.ByState[StateStopped]), int64(c.ByState[StateHeld])}}
		switch m.conn.Load() {
		case connUp:
			tc.Connected = 1
		case connDown:
			tc.Connected = 0
		}
		return tc
	})
	if err != nil || t == nil {
		return err
	}
	m.metrics = t
	m.observers = append(m.observers, subscriberMeter{t}) // first: before the observers of WithPolicy
	return nil
}

// subscriberMeter is the observer that counts updates and confirmations.
type subscriberMeter struct{ t *telemetry.Subscriber }

func (sm subscriberMeter) Observe(e rebound.Event) {
	d, ok := e.Detail.(SubscriptionEvent)
	if !ok {
		return
	}
	switch e.Kind {
	case rebound.EventDelivered:
		sm.t.Updated(updateResult(d.Result))
	case rebound.EventConfirmed:
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
