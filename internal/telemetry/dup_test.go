package telemetry_test

import (
	"testing"

	"github.com/rebound-go/rebound/internal/telemetry"
)

// Two recorders on one provider with the same attributes (two Managers,
// say) add up.
func TestTwoRecordersAddUp(t *testing.T) {
	reader, mp := newReader()
	a, _ := telemetry.NewRetry(mp, "subscriber")
	b, _ := telemetry.NewRetry(mp, "subscriber")
	a.Attempt(telemetry.OutcomeSuccess)
	b.Attempt(telemetry.OutcomeSuccess)
	b.Attempt(telemetry.OutcomeSuccess)
	got, _ := collect(t, reader)
	if n := got[telemetry.RetryAttempts]["component=subscriber,outcome=success"]; n != 3 {
		t.Errorf("two recorders: success = %d, want 3", n)
	}
	s1, _ := telemetry.NewSubscriber(mp)
	s2, _ := telemetry.NewSubscriber(mp)
	s1.StateChange(0, 2)
	s2.StateChange(0, 2)
	got, _ = collect(t, reader)
	if n := got[telemetry.SubscriberSubscriptions]["state=subscribed"]; n != 2 {
		t.Errorf("two subscribers: subscribed = %d, want 2", n)
	}
}
