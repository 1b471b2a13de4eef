package rebound_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
)

// BenchmarkObserverCost is the success path of a one-shot Retry and of a
// prebuilt Retrier, bare and observed: plain, one ObserverFunc,
// WithMeterProvider (the OTel SDK with a reader), and for the Retrier two
// observers (an ObserverFunc switching on the kind, as a user writes one,
// and a plain ObserverFunc). Options are built once, outside
// the loop, as their docs ask. cpu-ns/op is the process's CPU time per
// call (a coarse clock: run at least 0.5 s), steadier than wall time on a
// shared machine.
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
			cpu0, n := cpuTime(), 0
			for b.Loop() {
				if err := bc.f(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
