package rebound_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
)

// BenchmarkObserverCost is the success path of a one-shot Retry and of a
// prebuilt Retrier, bare and observed (issue 26): plain, one ObserverFunc,
// WithMeterProvider (the OTel SDK with a reader), and for the Retrier two
// observers (an ObserverFunc switching on the kind, as a user writes one,
// and a plain ObserverFunc). Options are built once, outside
// the loop, as their docs ask.
func BenchmarkObserverCost(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	ev := func(rebound.Event) {}
	one := rebound.WithObserver(rebound.ObserverFunc(ev))
	hooks := rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
		switch e.Kind {
		case rebound.EventAttempt, rebound.EventRetry, rebound.EventRecovered, rebound.EventGiveUp:
			ev(e)
		}
	}))
	meter := rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	retrier := func(opts ...rebound.Option) *rebound.Retrier {
		r, err := rebound.NewRetrier(rebound.Policy{}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	plain, withOne, withTwo := retrier(), retrier(one), retrier(hooks, one)
	for _, bc := range []struct {
		name string
		f    func() error
	}{
		{"Retry", func() error { return rebound.Retry(ctx, rebound.Policy{}, op) }},
		{"Retry+observer", func() error { return rebound.Retry(ctx, rebound.Policy{}, op, one) }},
		{"Retry+meter", func() error { return rebound.Retry(ctx, rebound.Policy{}, op, meter) }},
		{"Retrier.Do", func() error { return plain.Do(ctx, op) }},
		{"Retrier.Do+observer", func() error { return withOne.Do(ctx, op) }},
		{"Retrier.Do+2observers", func() error { return withTwo.Do(ctx, op) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
