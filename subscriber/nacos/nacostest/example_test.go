package nacostest_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// A real nacos-sdk-go naming client subscribes to a service of the
// in-process server and receives the instance the server registers.
func Example() {
	srv, err := nacostest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	dir, err := os.MkdirTemp("", "nacostest-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer nacostest.RemoveDir(dir) // not os.RemoveAll: the SDK may write after CloseClient

	// A program has no testing.TB: NewClientConfig takes the directory.
	cfg, err := nacostest.NewClientConfig(dir)
	if err != nil {
		log.Fatal(err)
	}
	cfg.TimeoutMs = 2000
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cfg,
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.CloseClient()

	updates := make(chan []model.Instance, 16)
	err = client.Subscribe(&vo.SubscribeParam{
		ServiceName: "orders",
		SubscribeCallback: func(instances []model.Instance, err error) {
			updates <- instances
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	next := func() []model.Instance {
		select {
		case ins := <-updates:
			return ins
		case <-time.After(10 * time.Second):
			log.Fatal("no update from the server")
			return nil
		}
	}
	fmt.Println("subscribed:", len(next()), "instances")

	err = srv.RegisterInstance("", "", "orders", nacostest.Instance{
		Ip: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enable: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	// The SDK's start-up redo may deliver the empty list once more before
	// the push: wait for the list with the instance.
	pushed := next()
	for len(pushed) == 0 {
		pushed = next()
	}
	for _, in := range pushed {
		fmt.Printf("pushed: %s:%d cluster %s\n", in.Ip, in.Port, in.ClusterName)
	}

	// Output:
	// subscribed: 0 instances
	// pushed: 10.0.0.1:8080 cluster DEFAULT
}

// Nacos' TPS control rejects a request with the handler's own response
// type, which nacos-sdk-go v2.3.2 reports as success: Subscribe returns nil
// but the server holds no subscription.
func ExampleServer_SetRejection() {
	srv, err := nacostest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "nacostest-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer nacostest.RemoveDir(dir)
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			NotLoadCacheAtStart: true, UpdateCacheWhenEmpty: true, CacheDir: dir, LogDir: dir, LogLevel: "error",
		},
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.CloseClient()

	// The first 2 subscribes of every new connection are rejected, as in a
	// reconnect storm; Rejection.Fraction rejects a share of all of them.
	err = srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{FirstPerConnection: 2})
	if err != nil {
		log.Fatal(err)
	}
	err = client.Subscribe(&vo.SubscribeParam{ServiceName: "orders", SubscribeCallback: func([]model.Instance, error) {}})
	fmt.Println("Subscribe:", err, "- subscribers at the server:", srv.SubscriberCount("", "", "orders"))
	// (The SDK's start-up redo may send, and have rejected, one more.)
	fmt.Println("rejected:", srv.Stats().Rejected[nacostest.RequestSubscribeService] >= 1)
	// Output:
	// Subscribe: <nil> - subscribers at the server: 0
	// rejected: true
}
