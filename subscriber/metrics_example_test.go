package subscriber_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The Manager's metrics, here read with the OTel SDK's manual reader (in a
// service: the MeterProvider of its exporter).
func ExampleWithPolicy_metrics() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	reg := subscribertest.New()
	reg.Set(subscriber.Key{Service: "orders"}, subscribertest.Instance("10.0.0.7", 8080))
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(mp)))
	if err != nil {
		panic(err)
	}
	delivered := make(chan struct{})
	if _, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, func([]subscriber.Instance) {
		close(delivered) // (called once here: the list never changes)
	}); err != nil {
		panic(err)
	}
	<-delivered
	_ = m.Close() // delivers the hook events queued so far: the counters are complete

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "rebound.subscriber.updates" {
			for _, p := range sum.DataPoints {
				v, _ := p.Attributes.Value("result")
				fmt.Printf("%s{result=%s} %d\n", m.Name, v.AsString(), p.Value)
			}
		}
	}
	// Output:
	// rebound.subscriber.updates{result=delivered} 1
}
