package rebound_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

func TestWithMeterProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter},
			rebound.WithMeterProvider(mp), rebound.WithLimiter(rate.NewLimiter(rate.Every(3*time.Second), 1)))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		errBusy := errors.New("busy")
		if err := r.Do(t.Context(), func(context.Context) error {
			if calls++; calls < 3 {
				return errBusy
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		_ = r.Do(t.Context(), func(context.Context) error { return rebound.Permanent(errBusy) })
		_ = r.Do(t.Context(), func(context.Context) error { return nil })

		telemetrytest.CheckValues(t, telemetrytest.Read(t, reader)) // only documented attribute values
		got := telemetrytest.Collect(t, reader)
		for k, want := range map[string]int64{"outcome=success": 2, "outcome=retry": 2, "outcome=gave_up": 1} {
			if n := got["rebound.retry.attempts"][k]; n != want {
				t.Errorf("rebound.retry.attempts{%s} = %d, want %d", k, n, want)
			}
		}
		if n := got["rebound.retry.delay"][""]; n != 2 {
			t.Errorf("rebound.retry.delay count %d, want 2", n)
		}
		// The limiter (one token per 3 s) made the second retry wait 1 s
		// after its 1 s delay.
		if n := got["rebound.limiter.wait"][""]; n != 1 {
			t.Errorf("rebound.limiter.wait count %d, want 1: %v", n, got)
		}
	})
	if rebound.WithMeterProvider(nil) != nil {
		t.Error("WithMeterProvider(nil) is not the nil option")
	}
}

// The success path with metrics on (the OTel SDK with a reader), side by
// side with the same Retrier without them and with plain Retry.
func BenchmarkRetrySuccessMetrics(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	metrics := rebound.WithMeterProvider(mp)
	run := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("Retry", func() error { return rebound.Retry(ctx, rebound.Policy{}, op) })
	run("Retry+metrics", func() error { return rebound.Retry(ctx, rebound.Policy{}, op, metrics) })
	plain, _ := rebound.NewRetrier(rebound.Policy{})
	run("Retrier", func() error { return plain.Do(ctx, op) })
	withMetrics, _ := rebound.NewRetrier(rebound.Policy{}, metrics)
	run("Retrier+metrics", func() error { return withMetrics.Do(ctx, op) })
}
