package etcd_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// A provider registers an instance; a consumer's Manager delivers it.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	cluster, err := etcdtest.NewCluster(1, etcdtest.WithDir(dir)) // a real etcd, in this process
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	cli, err := clientv3.New(etcdreg.ClientConfig(nil, cluster.Endpoints()...))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	ctx := context.Background()
	orders := subscriber.Key{Service: "orders"}
	g, err := etcdreg.Register(ctx, cli, orders, subscriber.Instance{
		IP: "10.0.1.7", Port: 8080, Weight: 1, Healthy: true, Enabled: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	reg, _ := etcdreg.New(cli)
	m, _ := subscriber.New(reg)
	lists := make(chan []subscriber.Instance, 10)
	_, _ = m.Subscribe(ctx, orders, func(l []subscriber.Instance) { lists <- l })
	for _, in := range <-lists {
		fmt.Printf("%s:%d ephemeral=%v\n", in.IP, in.Port, in.Ephemeral)
	}

	_ = g.Shutdown(ctx) // deregister
	select {
	case l := <-lists:
		fmt.Println(len(l), "instances")
	case <-time.After(20 * time.Second):
	}
	_ = m.Close()
	_ = reg.Close()
	// Output:
	// 10.0.1.7:8080 ephemeral=true
	// 0 instances
}

// Providers registered with etcd's own naming/endpoints (what
// "etcd:///my-service" gRPC clients resolve) are read unchanged through
// EndpointsLayout.
func ExampleEndpointsLayout() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	cluster, err := etcdtest.NewCluster(1, etcdtest.WithDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	cli, err := clientv3.New(etcdreg.ClientConfig(nil, cluster.Endpoints()...))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	ctx := context.Background()

	// A provider, as etcd's docs show it.
	em, _ := endpoints.NewManager(cli, "my-service")
	lease, _ := cli.Grant(ctx, 30)
	_ = em.AddEndpoint(ctx, "my-service/10.0.1.7:8080",
		endpoints.Endpoint{Addr: "10.0.1.7:8080", Metadata: map[string]string{"zone": "a"}},
		clientv3.WithLease(lease.ID))

	// A consumer through rebound: the target is the Key's Service.
	reg, _ := etcdreg.New(cli, etcdreg.WithLayout(etcdreg.EndpointsLayout(nil)))
	m, _ := subscriber.New(reg)
	lists := make(chan []subscriber.Instance, 10)
	_, _ = m.Subscribe(ctx, subscriber.Key{Service: "my-service"}, func(l []subscriber.Instance) { lists <- l })
	for _, in := range <-lists {
		fmt.Printf("%s %s:%d zone=%s\n", in.ID, in.IP, in.Port, in.Metadata["zone"])
	}
	_ = m.Close()
	_ = reg.Close()
	// Output:
	// 10.0.1.7:8080 10.0.1.7:8080 zone=a
}
