package reboundgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

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
