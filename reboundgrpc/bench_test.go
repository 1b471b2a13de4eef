package reboundgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// BenchmarkUnary compares a unary RPC through a ClientConn on the rebound
// resolver with one on grpc-go's passthrough resolver, same server, same
// balancer (pick_first): the resolver is off the RPC path, so the two
// should be equal within noise.
func BenchmarkUnary(b *testing.B) {
	be := startBackend(b)
	reg := subscribertest.New()
	defer reg.Close()
	reg.Set(subscriber.Key{Service: "orders"}, be.instance())
	m, err := subscriber.New(reg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rb, err := reboundgrpc.NewBuilder(m)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Close()

	for _, tc := range []struct {
		name   string
		target string
		opts   []grpc.DialOption
	}{
		{"passthrough", "passthrough:///" + be.addr, nil},
		{"rebound", "rebound:///orders", []grpc.DialOption{grpc.WithResolvers(rb)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cc, err := grpc.NewClient(tc.target, append(tc.opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := healthpb.NewHealthClient(cc)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			if _, err := client.Check(ctx, req, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := client.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFireAndForget measures a call that succeeds at once, made
// through generated client code on a ClientConn with the FireAndForget
// interceptor (bound to a failback Invoker, no store), beside the same call
// without the interceptor: the cost of the interceptor and the Queue on
// the first attempt.
func BenchmarkFireAndForget(b *testing.B) {
	be := startBackend(b)
	for _, ff := range []bool{false, true} {
		name := "plain"
		if ff {
			name = "fireandforget"
		}
		b.Run(name, func(b *testing.B) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			f := reboundgrpc.NewFireAndForget("/grpc.health.v1.Health/Check")
			if ff {
				opts = append(opts, grpc.WithChainUnaryInterceptor(f.UnaryClientInterceptor()))
			}
			cc, err := grpc.NewClient("passthrough:///"+be.addr, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true))))
			if err != nil {
				b.Fatal(err)
			}
			defer fb.Close()
			f.Bind(fb)
			client := healthpb.NewHealthClient(cc)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{Service: ""}
			if _, err := client.Check(ctx, req, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := client.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
