package nacos_test

import (
	"context"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// readmeNacos is the README's "Manager over Nacos" snippet (the root
// module's TestREADMESnippets checks that the README shows this body
// verbatim): it serves until ctx is done, then closes the Manager, the
// adapter and the client, in that order.
func readmeNacos(ctx context.Context, server constant.ServerConfig, dir string, onChange func([]subscriber.Instance)) error {
	// README snippet: nacos
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  &constant.ClientConfig{NotLoadCacheAtStart: true, UpdateCacheWhenEmpty: true, CacheDir: dir, LogDir: dir},
		ServerConfigs: []constant.ServerConfig{server}, // {IpAddr: "nacos.internal", Port: 8848}
	})
	if err != nil {
		return err
	}
	defer client.CloseClient()
	reg, err := nacos.New(client)
	if err != nil {
		return err
	}
	defer reg.Close()
	m, err := subscriber.New(reg) // subscribes until acknowledged, re-confirms after every reconnect
	if err != nil {
		return err
	}
	defer m.Close() // first the Manager, then the adapter, then the client
	if _, err := m.Subscribe(ctx, subscriber.Key{Service: "orders"}, onChange); err != nil {
		return err // only a bad argument or a closed Manager: the registry's errors are retried
	}
	<-ctx.Done() // serve; onChange gets each new list once, in order
	return nil
	// README snippet end
}

// TestREADMENacos runs the snippet against an in-process Nacos server
// that has one instance of "orders": the listener gets it, and the
// snippet returns when its context ends.
func TestREADMENacos(t *testing.T) {
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.RegisterInstance("", "", "orders", nacostest.Instance{Ip: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enable: true}); err != nil {
		t.Fatal(err)
	}
	lists := make(chan []subscriber.Instance, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- readmeNacos(ctx, srv.ServerConfig(), nacostest.CacheDir(t), func(l []subscriber.Instance) { lists <- l })
	}()
	select {
	case l := <-lists:
		if len(l) != 1 || l[0].IP != "10.0.0.1" || l[0].Port != 8080 {
			t.Errorf("first list %v, want [10.0.0.1:8080]", l)
		}
	case err := <-done:
		t.Fatalf("the snippet returned before its context ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no list within 30 s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the snippet returned %v, want nil after its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the snippet did not return within 30 s of its context ending")
	}
}
