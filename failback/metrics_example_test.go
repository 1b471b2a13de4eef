package failback_test

import (
	"context"
	"fmt"
	"syscall"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
)

type refusingProvider struct{}

func (refusingProvider) Target() string { return "10.0.0.9:20880" }
func (refusingProvider) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, fmt.Errorf("dial tcp 10.0.0.9:20880: %w", syscall.ECONNREFUSED)
}

// The invoker's queue and outcomes as metrics, read from Stats when the
// reader collects (Invoke records nothing).
func Example_metrics() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	fb, err := failback.New(cluster.NewStaticDirectory(refusingProvider{}),
		failback.WithPolicy(rebound.Policy{Initial: 30 * time.Second, Max: 30 * time.Second, Jitter: rebound.NoJitter},
			rebound.WithMeterProvider(mp)))
	if err != nil {
		panic(err)
	}
	defer fb.Close()
	for range 2 {
		_, _ = fb.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"}) // refused: queued
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "rebound.failback.queue" {
			fmt.Println(m.Name, sum.DataPoints[0].Value)
		}
	}
	// Output:
	// rebound.failback.queue 2
}
