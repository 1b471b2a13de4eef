package failback

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.inv.Method == "ok-later" && !c.first {
				return "ok", nil
			}
			return nil, errRefused
		})
		f := mustNew(t, cluster.NewStaticDirectory(p), withMeterProvider(mp), WithMaxTasks(2),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(2)))
		for _, m := range []string{"ok-later", "never", "full"} { // the third finds the queue full
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: m})
		}
		got := telemetrytest.Collect(t, reader)
		if q := got["rebound.failback.queue"][""]; q != 2 {
			t.Errorf("queue %d, want 2: %v", q, got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		got = telemetrytest.Collect(t, reader)
		c := got["rebound.failback.calls"]
		if c["outcome=succeeded"] != 1 || c["outcome=gave_up"] != 1 || c["outcome=dropped"] != 1 || got["rebound.failback.queue"][""] != 0 {
			t.Errorf("after the retries: %v", got)
		}
		if n := got["rebound.retry.attempts"]["component=failback,outcome=gave_up"]; n != 1 {
			t.Errorf("retry attempts: %v", got["rebound.retry.attempts"])
		}
		mustClose(t, f)
		if got := telemetrytest.Collect(t, reader); len(got["rebound.failback.queue"]) != 0 {
			t.Errorf("still reported after Close: %v", got)
		}
	})
}

// The success path with metrics on, side by side with it off (metrics are
// read from Stats when collected: the call path is the same).
func BenchmarkInvokeMetrics(b *testing.B) {
	inv := &cluster.Invocation{Method: "Notify"}
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	for _, bc := range []struct {
		name string
		opts []Option
	}{{"off", nil}, {"metrics", []Option{withMeterProvider(mp)}}} {
		f := mustNew(b, cluster.NewStaticDirectory(benchInvoker), bc.opts...)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Invoke(ctx, inv); err != nil {
					b.Fatal(err)
				}
			}
		})
		mustClose(b, f)
	}
}
