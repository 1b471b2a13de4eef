package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

func newReader() (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	return telemetrytest.NewProvider()
}

// collect returns name -> attribute set (encoded) -> value (see
// telemetrytest.Read) and name -> unit; every metric must be in ScopeName.
func collect(t *testing.T, r *sdkmetric.ManualReader) (map[string]map[string]int64, map[string]string) {
	t.Helper()
	s := telemetrytest.Read(t, r)
	for name, scope := range s.Scopes {
		if scope != telemetry.ScopeName {
			t.Errorf("%s: scope %q", name, scope)
		}
	}
	return s.Values, s.Units
}

func TestNilProviderRecordsNothing(t *testing.T) {
	r, err := telemetry.NewRetry(nil, attribute.String("component", "x"))
	if r != nil || err != nil {
		t.Fatalf("NewRetry(nil) = %v, %v", r, err)
	}
	r.Attempt(telemetry.OutcomeSuccess)
	r.Delay(context.Background(), time.Second)
	r.LimiterWait(context.Background(), time.Second)
	_ = r.Close()
	s, _ := telemetry.NewSubscriber(nil, nil)
	s.Updated(telemetry.UpdateDelivered)
	s.Confirmed(telemetry.ConfirmEvidence)
	_ = s.Close()
	f, _ := telemetry.NewFailback(nil, nil)
	_ = f.Close()
}

func TestRetry(t *testing.T) {
	reader, mp := newReader()
	r, err := telemetry.NewRetry(mp, attribute.String("component", "subscriber"))
	if err != nil {
		t.Fatal(err)
	}
	r.Attempt(telemetry.OutcomeRetry)
	r.Attempt(telemetry.OutcomeRetry)
	r.Attempt(telemetry.OutcomeSuccess)
	r.Attempt(telemetry.OutcomeGaveUp)
	r.Delay(context.Background(), 1500*time.Millisecond)
	r.LimiterWait(context.Background(), 10*time.Millisecond)
	got, units := collect(t, reader)
	want := map[string]int64{
		"component=subscriber,outcome=success": 1,
		"component=subscriber,outcome=retry":   2,
		"component=subscriber,outcome=gave_up": 1,
	}
	for k, v := range want {
		if got[telemetry.RetryAttempts][k] != v {
			t.Errorf("attempts{%s} = %d, want %d (all: %v)", k, got[telemetry.RetryAttempts][k], v, got)
		}
	}
	if got[telemetry.RetryDelay]["component=subscriber"] != 1 || got[telemetry.LimiterWait]["component=subscriber"] != 1 {
		t.Errorf("histograms: %v", got)
	}
	if units[telemetry.RetryDelay] != "s" || units[telemetry.RetryAttempts] != "{attempt}" {
		t.Errorf("units %v", units)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ = collect(t, reader)
	if _, ok := got[telemetry.RetryAttempts]; ok {
		t.Errorf("attempts still reported after Close: %v", got)
	}
}

func TestSubscriber(t *testing.T) {
	reader, mp := newReader()
	counts := telemetry.SubscriberCounts{Connected: -1}
	s, err := telemetry.NewSubscriber(mp, func() telemetry.SubscriberCounts { return counts })
	if err != nil {
		t.Fatal(err)
	}
	// Before anything happens every state is reported, at 0, and the
	// connection is not reported (unknown).
	got, _ := collect(t, reader)
	if len(got[telemetry.SubscriberSubscriptions]) != 5 || got[telemetry.SubscriberSubscriptions]["state=pending"] != 0 {
		t.Errorf("initial subscriptions: %v", got)
	}
	if _, ok := got[telemetry.SubscriberConnected]; ok {
		t.Errorf("connection reported before it is known: %v", got)
	}
	counts = telemetry.SubscriberCounts{States: [5]int64{1, 0, 1, 0}, Connected: 0}
	s.Updated(telemetry.UpdateDelivered)
	s.Updated(telemetry.UpdateDuplicate)
	s.Updated(telemetry.UpdateDelivered)
	s.Confirmed(telemetry.ConfirmEvidence)
	s.Confirmed(telemetry.ConfirmEvidence)
	s.Confirmed(telemetry.ConfirmSubscribe)
	got, _ = collect(t, reader)
	for k, v := range map[string]int64{"state=pending": 1, "state=subscribed": 0, "state=retrying": 1, "state=stopped": 0} {
		if got[telemetry.SubscriberSubscriptions][k] != v {
			t.Errorf("subscriptions{%s} = %d, want %d", k, got[telemetry.SubscriberSubscriptions][k], v)
		}
	}
	if u := got[telemetry.SubscriberUpdates]; u["result=delivered"] != 2 || u["result=duplicate"] != 1 {
		t.Errorf("updates %v", u)
	}
	if c := got[telemetry.SubscriberConfirmations]; c["reason=evidence"] != 2 || c["reason=subscribe"] != 1 || len(c) != 2 {
		t.Errorf("confirmations %v", c)
	}
	if c, ok := got[telemetry.SubscriberConnected][""]; !ok || c != 0 {
		t.Errorf("connected %v", got[telemetry.SubscriberConnected])
	}
	s.Confirmed(-1) // out of range: not recorded
	got, _ = collect(t, reader)
	if n := len(got[telemetry.SubscriberConfirmations]); n != 2 {
		t.Errorf("%d reasons: %v", n, got[telemetry.SubscriberConfirmations])
	}
	_ = s.Close()
}

func TestFailback(t *testing.T) {
	reader, mp := newReader()
	st := telemetry.FailbackStats{Queue: 3, Succeeded: 5, GaveUp: 1, Dropped: 2}
	f, err := telemetry.NewFailback(mp, func() telemetry.FailbackStats { return st })
	if err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, reader)
	if got[telemetry.FailbackQueue][""] != 3 {
		t.Errorf("queue %v", got)
	}
	if c := got[telemetry.FailbackCalls]; c["outcome=succeeded"] != 5 || c["outcome=gave_up"] != 1 || c["outcome=dropped"] != 2 {
		t.Errorf("calls %v", c)
	}
	_ = f.Close()
}

// The success path of a retry loop with metrics on: one atomic add, no
// allocation, whatever the SDK.
func BenchmarkRetryAttempt(b *testing.B) {
	_, mp := newReader()
	r, _ := telemetry.NewRetry(mp, attribute.String("component", "subscriber"))
	var none *telemetry.Retry
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			none.Attempt(telemetry.OutcomeSuccess)
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Attempt(telemetry.OutcomeSuccess)
		}
	})
	b.Run("sdk-delay", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			r.Delay(ctx, time.Second)
		}
	})
}
