package subscriber_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		reg := subscribertest.New()
		a, b := subscriber.Key{Service: "a"}, subscriber.Key{Service: "b"}
		reg.Set(a, subscribertest.Instance("10.0.0.1", 80))
		reg.Set(b, subscribertest.Instance("10.0.0.2", 80))
		var delivered atomic.Int64 // observers of different subscriptions run concurrently
		m, err := subscriber.New(reg, subscriber.WithLimiter(nil),
			subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(mp),
				rebound.WithObserver(subscriber.Hooks{Delivered: func(subscriber.Delivery) { delivered.Add(1) }})))
		if err != nil {
			t.Fatal(err)
		}
		// Every state is reported from the start, at 0.
		got := telemetrytest.Collect(t, reader)
		if s := got["rebound.subscriber.subscriptions"]; len(s) != 5 || s["state=pending"] != 0 {
			t.Errorf("before any subscription: %v", got)
		}
		for _, k := range []subscriber.Key{a, b} {
			if _, err := m.Subscribe(t.Context(), k, func([]subscriber.Instance) {}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		got = telemetrytest.Collect(t, reader)
		if n := got["rebound.subscriber.subscriptions"]["state=subscribed"]; n != 2 {
			t.Errorf("subscribed = %d, want 2: %v", n, got)
		}
		if n := got["rebound.subscriber.updates"]["result=delivered"]; n != 2 {
			t.Errorf("updates{delivered} = %d, want 2: %v", n, got)
		}
		if n := got["rebound.subscriber.confirmations"]["reason=subscribe"]; n != 2 {
			t.Errorf("confirmations{subscribe} = %d, want 2: %v", n, got)
		}
		if n := got["rebound.retry.attempts"]["component=subscriber,outcome=success"]; n != 2 {
			t.Errorf("retry.attempts{success} = %d, want 2 (the first attempts)", n)
		}
		if delivered.Load() != 2 {
			t.Errorf("the user's Delivered hook ran %d times, want 2", delivered.Load())
		}

		// An outage: both retry, the connection is reported down, and the
		// retry loops' attempts are counted. Retries wait for Connected
		// while the connection is reported down (park.go): the registry
		// restarts and rejects them first, then goes down.
		reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
		reg.Restart()
		time.Sleep(10 * time.Second)
		reg.SetDown(true)
		synctest.Wait()
		got = telemetrytest.Collect(t, reader)
		if n := got["rebound.subscriber.subscriptions"]["state=retrying"]; n != 2 {
			t.Errorf("during the outage: retrying = %d, want 2: %v", n, got)
		}
		if c, ok := got["rebound.subscriber.registry.connected"][""]; !ok || c != 0 {
			t.Errorf("during the outage: connected = %v", got["rebound.subscriber.registry.connected"])
		}
		if n := got["rebound.retry.attempts"]["component=subscriber,outcome=retry"]; n == 0 {
			t.Errorf("no retry attempts counted: %v", got["rebound.retry.attempts"])
		}
		reg.SetFailure(nil)
		reg.SetDown(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		got = telemetrytest.Collect(t, reader)
		if n := got["rebound.subscriber.subscriptions"]["state=subscribed"]; n != 2 || got["rebound.subscriber.registry.connected"][""] != 1 {
			t.Errorf("after the outage: %v", got)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if got := telemetrytest.Collect(t, reader); len(got["rebound.subscriber.subscriptions"]) != 0 {
			t.Errorf("still reported after Close: %v", got)
		}
	})
}

// wordyConfirmer is a registry whose adapter confirms each subscription
// in its own words, as the Nacos adapter does after a reconnect.
type wordyConfirmer struct{ *subscribertest.Registry }

func (w wordyConfirmer) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	err := w.Registry.Subscribe(ctx, k, s)
	s.Confirmed("SDK cache refreshed from the server after the reconnect")
	return err
}

// Every attribute value the Manager records comes from the documented
// set: the adapter's free-text evidence is counted as reason=evidence and
// stays in Status.ConfirmReason.
func TestMetricAttributesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader, mp := telemetrytest.NewProvider()
		reg := subscribertest.New()
		k := subscriber.Key{Service: "a"}
		reg.Set(k, subscribertest.Instance("10.0.0.1", 80))
		m, err := subscriber.New(wordyConfirmer{reg}, subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(mp)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.Subscribe(t.Context(), k, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Ready()
		reg.SetDown(true) // a retry, a hold window, more outcomes
		time.Sleep(10 * time.Second)
		reg.SetDown(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		snap := telemetrytest.Read(t, reader)
		if n := telemetrytest.CheckValues(t, snap); n < 10 {
			t.Errorf("only %d data points checked", n)
		}
		if n := snap.Values["rebound.subscriber.confirmations"]["reason=evidence"]; n == 0 {
			t.Errorf("no reason=evidence confirmation: %v", snap.Values["rebound.subscriber.confirmations"])
		}
		if got := s.Status().ConfirmReason; got != "SDK cache refreshed from the server after the reconnect" {
			t.Errorf("Status.ConfirmReason = %q, want the adapter's words", got)
		}
	})
}
