package reboundgrpc_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A ClientConn on the rebound resolver, and fire-and-forget calls through
// failback over it. The registry here is subscribertest's in-memory one;
// use subscriber/nacos or subscriber/etcd in a service.
func Example() {
	// A provider: a real grpc-go server on loopback.
	lis, _ := net.Listen("tcp4", "127.0.0.1:0")
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	port := uint64(lis.Addr().(*net.TCPAddr).Port)
	registry := subscribertest.New()
	defer registry.Close()
	registry.Set(subscriber.Key{Service: "orders"},
		subscriber.Instance{IP: "127.0.0.1", Port: port, Weight: 1, Healthy: true, Enabled: true})

	// The consumer: a Manager over the registry, a Builder over the
	// Manager, any number of ClientConns over the Builder.
	m, _ := subscriber.New(registry)
	defer m.Close()
	b, err := reboundgrpc.NewBuilder(m)
	if err != nil {
		panic(err)
	}
	defer b.Close() // after the ClientConns, before the Manager
	cc, err := grpc.NewClient("rebound:///orders",
		grpc.WithResolvers(b),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	fmt.Println(resp.GetStatus(), err)

	// Fire-and-forget calls: a failback invoker over the ClientConn queues
	// a call that fails with a transient status and retries it through
	// the balancer.
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
	if err != nil {
		panic(err)
	}
	defer fb.Close()
	reply := &healthpb.HealthCheckResponse{}
	_, err = fb.Invoke(context.Background(), &cluster.Invocation{
		Method: "/grpc.health.v1.Health/Check",
		Args:   []any{&healthpb.HealthCheckRequest{}, reply},
	})
	fmt.Println(reply.GetStatus(), err)
	fmt.Println("subscriptions:", len(m.Status())) // one for the Builder
	// Output:
	// SERVING <nil>
	// SERVING <nil>
	// subscriptions: 1
}

// A target for a subscriber.Key: the Builder resolves it to that key.
func ExampleTarget() {
	t, err := reboundgrpc.Target("rebound", subscriber.Key{Namespace: "prod", Group: "shop", Service: "orders", Clusters: []string{"b", "a"}})
	fmt.Println(t, err)
	// Output:
	// rebound://prod/orders?clusters=a%2Cb&group=shop <nil>
}
