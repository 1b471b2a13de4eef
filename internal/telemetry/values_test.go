package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

// Every recorder, every outcome: each instrument is in Values and each
// attribute value recorded is in its fixed set; each instrument of Values
// is recorded (the table and the code agree both ways).
func TestEveryValueIsDocumented(t *testing.T) {
	reader, mp := telemetrytest.NewProvider()
	r, err := telemetry.NewRetry(mp, attribute.String(telemetry.AttrComponent, telemetry.ComponentSubscriber))
	if err != nil {
		t.Fatal(err)
	}
	r.Attempt(telemetry.OutcomeSuccess)
	r.Throttled()
	r.Delay(context.Background(), time.Second)
	r.LimiterWait(context.Background(), time.Second)
	s, err := telemetry.NewSubscriber(mp, func() telemetry.SubscriberCounts { return telemetry.SubscriberCounts{Connected: 1} })
	if err != nil {
		t.Fatal(err)
	}
	for u := telemetry.UpdateDelivered; u <= telemetry.UpdateStale; u++ {
		s.Updated(u)
	}
	s.Confirmed(telemetry.ConfirmSubscribe)
	s.Confirmed(telemetry.ConfirmEvidence)
	if _, err := telemetry.NewFailback(mp, func() telemetry.FailbackStats { return telemetry.FailbackStats{Succeeded: 1} }); err != nil {
		t.Fatal(err)
	}
	if _, err := telemetry.NewGRPC(mp, func() telemetry.GRPCStats { return telemetry.GRPCStats{ResolveNows: 2, Refreshes: 1} }); err != nil {
		t.Fatal(err)
	}
	if _, err := telemetry.NewBreaker(mp, func() telemetry.BreakerCounts {
		return telemetry.BreakerCounts{States: [3]int64{2, 0, 1}, Transitions: [3]int64{1, 1, 2}}
	}); err != nil {
		t.Fatal(err)
	}
	snap := telemetrytest.Read(t, reader)
	if n := telemetrytest.CheckValues(t, snap); n < 26 {
		t.Errorf("%d data points checked, want at least 26", n)
	}
	for name := range telemetry.Values() {
		if _, ok := snap.Values[name]; !ok {
			t.Errorf("%s is in Values but was not recorded", name)
		}
	}
}
