package reboundgrpc_test

import (
	"context"
	"testing"
	"testing/synctest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
)

// TestMetrics: the Builder's instruments read its Stats.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		reg, b := memEnv(t, reboundgrpc.WithMeterProvider(mp))
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		for range 10 {
			r.ResolveNow(resolver.ResolveNowOptions{})
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						key := m.Name
						if v, ok := p.Attributes.Value("result"); ok {
							key += "{" + v.AsString() + "}"
						}
						got[key] += p.Value
					}
				}
			}
		}
		t.Logf("%v", got)
		want := map[string]int64{
			"rebound.grpc.subscriptions":          1,
			"rebound.grpc.resolvers":              1,
			"rebound.grpc.resolve_now{refreshed}": 1,
			"rebound.grpc.resolve_now{coalesced}": 9,
			"rebound.grpc.rejected_states":        0,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %d, want %d", k, got[k], v)
			}
		}
	})
}
