package nacos_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// A subscriber.Manager keeps a Nacos subscription alive through a
// nacos-sdk-go client. The example's registry is an in-process nacostest
// server; with a real Nacos, put its address in ServerConfigs.
func ExampleNew() {
	srv, err := nacostest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "nacos-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer nacostest.RemoveDir(dir) // the SDK may still write its cache after CloseClient

	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			NotLoadCacheAtStart:  true,
			UpdateCacheWhenEmpty: true, // else an empty list is never delivered
			CacheDir:             dir,
			LogDir:               dir,
			LogLevel:             "error",
		},
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()}, // {IpAddr: "nacos.internal", Port: 8848}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.CloseClient()

	reg, err := nacos.New(client) // *rebound.ArgumentError for a nil client or a bad option
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	m, err := subscriber.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	_ = srv.RegisterInstance("", "", "orders", nacostest.Instance{Ip: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enable: true})
	lists := make(chan []subscriber.Instance, 16)
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"},
		func(instances []subscriber.Instance) { lists <- instances }) // each change, once, in order
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-sub.Ready(): // the registry acknowledged the subscription
	case <-time.After(10 * time.Second):
		log.Fatal("not subscribed")
	}
	fmt.Println(sub.Status().State, addrsOf(<-lists))

	_ = srv.RegisterInstance("", "", "orders", nacostest.Instance{Ip: "10.0.0.2", Port: 8080, Weight: 1, Healthy: true, Enable: true})
	fmt.Println(addrsOf(<-lists))
	// Output:
	// subscribed [10.0.0.1:8080]
	// [10.0.0.1:8080 10.0.0.2:8080]
}

func addrsOf(ins []subscriber.Instance) []string {
	out := []string{}
	for _, in := range ins {
		out = append(out, fmt.Sprintf("%s:%d", in.IP, in.Port))
	}
	slices.Sort(out)
	return out
}

// Register keeps a provider's instance registered: it returns once the
// server accepted the first registration, repairs it after reconnects
// (checking the server's list, not trusting the SDK's redo), and
// Shutdown deregisters it and returns once the server no longer lists it.
func ExampleRegister() {
	srv, err := nacostest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "nacos-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer nacostest.RemoveDir(dir)
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  &constant.ClientConfig{NotLoadCacheAtStart: true, CacheDir: dir, LogDir: dir, LogLevel: "error"},
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.CloseClient()

	g, err := nacos.Register(context.Background(), client, subscriber.Key{Service: "orders"},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enabled: true})
	if err != nil {
		log.Fatal(err) // ErrRejected, a *rebound.ArgumentError (a second Register of the service), ...
	}
	fmt.Println(g.Status().State, len(srv.Instances("", "", "orders")))

	// Drain: deregister, let consumers move away, then stop serving.
	err = subscriber.Drain(context.Background(), 0, func(context.Context) error { return nil }, g)
	fmt.Println(err, g.Status().State, len(srv.Instances("", "", "orders")))
	// Output:
	// registered 1
	// <nil> stopped 0
}
