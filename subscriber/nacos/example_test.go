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
