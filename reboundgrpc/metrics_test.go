package reboundgrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestMetrics: the Builder's instruments read its Stats.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		reg, b := memEnv(t, reboundgrpc.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(mp)))
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

// TestWithPolicyOnlyObserves: WithPolicy's options are observers and
// meters; a gate or a limit (the re-sends pass none and never stop) is an
// ArgumentError naming the rule.
func TestWithPolicyOnlyObserves(t *testing.T) {
	m, err := subscriber.New(subscribertest.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, opt := range []rebound.Option{rebound.WithMaxAttempts(3), rebound.WithLimiter(rate.NewLimiter(1, 1))} {
		b, err := reboundgrpc.NewBuilder(m, reboundgrpc.WithPolicy(rebound.Policy{}, rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {})), opt))
		if b != nil {
			_ = b.Close()
		}
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != "reboundgrpc.WithPolicy" || !strings.Contains(ae.Reason, "only rebound.WithObserver") {
			t.Fatalf("NewBuilder(WithPolicy with %T) = %v; want an ArgumentError of reboundgrpc.WithPolicy stating the rule", opt, err)
		}
	}
	b, err := reboundgrpc.NewBuilder(m, reboundgrpc.WithPolicy(rebound.Policy{}, rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {})), nil))
	if err != nil {
		t.Fatalf("NewBuilder(WithPolicy with an observer and a nil option) = %v", err)
	}
	_ = b.Close()
}
