package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rebound-go/rebound"
)

// A Retrier records its attempts, delays and limiter waits with the
// MeterProvider it is given (here the OTel SDK with a manual reader; in a
// service, the provider of its exporter).
func ExampleWithMeterProvider() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond},
		rebound.WithMeterProvider(mp, attribute.String("component", "payments")))
	if err != nil {
		panic(err)
	}
	calls := 0
	_ = r.Do(context.Background(), func(context.Context) error {
		if calls++; calls == 1 {
			return errors.New("connection refused")
		}
		return nil
	})

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "rebound.retry.attempts" {
			for _, outcome := range []string{"success", "retry", "gave_up"} {
				for _, p := range sum.DataPoints {
					if v, _ := p.Attributes.Value("outcome"); v.AsString() == outcome {
						fmt.Printf("%s{outcome=%s} %d\n", m.Name, outcome, p.Value)
					}
				}
			}
		}
	}
	// Output:
	// rebound.retry.attempts{outcome=success} 1
	// rebound.retry.attempts{outcome=retry} 1
	// rebound.retry.attempts{outcome=gave_up} 0
}
