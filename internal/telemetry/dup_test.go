package telemetry_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/rebound-go/rebound/internal/telemetry"
)

// Two recorders on one provider with the same attributes (two Managers,
// say) add up.
func TestTwoRecordersAddUp(t *testing.T) {
	reader, mp := newReader()
	a, _ := telemetry.NewRetry(mp, attribute.String("component", "subscriber"))
	b, _ := telemetry.NewRetry(mp, attribute.String("component", "subscriber"))
	a.Attempt(telemetry.OutcomeSuccess)
	b.Attempt(telemetry.OutcomeSuccess)
	b.Attempt(telemetry.OutcomeSuccess)
	got, _ := collect(t, reader)
	if n := got[telemetry.RetryAttempts]["component=subscriber,outcome=success"]; n != 3 {
		t.Errorf("two recorders: success = %d, want 3", n)
	}
	two := func() telemetry.SubscriberCounts { return telemetry.SubscriberCounts{States: [5]int64{0, 1, 0, 0}} }
	_, _ = telemetry.NewSubscriber(mp, two)
	_, _ = telemetry.NewSubscriber(mp, two)
	got, _ = collect(t, reader)
	if n := got[telemetry.SubscriberSubscriptions]["state=subscribed"]; n != 2 {
		t.Errorf("two subscribers: subscribed = %d, want 2", n)
	}
}
