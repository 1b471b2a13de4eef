//go:build !race

package nacos_test

// The conformance suite stops and restarts the server, which makes the
// nacos-sdk-go client reconnect; that trips data races inside
// nacos-sdk-go v2.3.2 itself (rpc_client.go: reconnect writes
// RpcClient.currentConnection while notifyConnectionEvent and Request
// read it, upstream issue 833), so this file is excluded from -race
// builds, like e2e_reconnect_test.go.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestConformance runs the conformance suite of package subscribertest
// against the adapter, the real nacos-sdk-go client and the in-process
// server of package nacostest. The server forgets everything when it
// stops, so the harness seeds it again with the registered instances
// before each Start, as re-registering providers would.
func TestConformance(t *testing.T) {
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	type registered struct {
		key  subscriber.Key
		inst nacostest.Instance
	}
	var (
		mu  sync.Mutex
		all = map[string]registered{} // by service@ip:port
	)
	toNacos := func(in subscriber.Instance) nacostest.Instance {
		return nacostest.Instance{
			Ip: in.IP, Port: in.Port, Weight: in.Weight, Healthy: in.Healthy, Enable: in.Enabled,
			Ephemeral: true, ClusterName: in.Cluster, Metadata: in.Metadata,
		}
	}
	id := func(k subscriber.Key, in subscriber.Instance) string {
		return k.String() + "@" + subscribertest.Addrs([]subscriber.Instance{in})
	}

	subscribertest.Run(t, subscribertest.Harness{
		NewRegistry: func(t *testing.T) (subscriber.Registry, func()) {
			client, err := clients.NewNamingClient(vo.NacosClientParam{
				ClientConfig:  nacostest.ClientConfig(t),
				ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
			})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := nacos.New(client)
			if err != nil {
				client.CloseClient()
				t.Fatal(err)
			}
			return reg, func() {
				reg.Close()
				client.CloseClient()
			}
		},
		Register: func(t *testing.T, k subscriber.Key, in subscriber.Instance) {
			ni := toNacos(in)
			if err := srv.RegisterInstance(k.Namespace, k.Group, k.Service, ni); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			all[id(k, in)] = registered{k, ni}
			mu.Unlock()
		},
		Deregister: func(t *testing.T, k subscriber.Key, in subscriber.Instance) {
			mu.Lock()
			r, ok := all[id(k, in)]
			delete(all, id(k, in))
			mu.Unlock()
			if !ok || !srv.DeregisterInstance(k.Namespace, k.Group, k.Service, r.inst) {
				t.Fatalf("instance %s was not registered", id(k, in))
			}
		},
		Stop: func(t *testing.T) { srv.Stop() },
		Start: func(t *testing.T) {
			mu.Lock()
			for _, r := range all {
				if err := srv.RegisterInstance(r.key.Namespace, r.key.Group, r.key.Service, r.inst); err != nil {
					mu.Unlock()
					t.Fatal(err)
				}
			}
			mu.Unlock()
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
		},
		Leaks: nacostest.SDKLeaks(),
	})
}

// TestRegistrationConformance runs the Registration conformance suite of
// package subscribertest against nacos.Register, the real nacos-sdk-go
// client and the nacostest server, which comes back empty after a
// restart: the Registrations (with the SDK's redo) must register again.
func TestRegistrationConformance(t *testing.T) {
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	newNamingClient := func(t *testing.T) naming_client.INamingClient {
		client, err := clients.NewNamingClient(vo.NacosClientParam{
			ClientConfig:  nacostest.ClientConfig(t),
			ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
		})
		if err != nil {
			t.Fatal(err)
		}
		return client
	}
	subscribertest.RunRegistration(t, subscribertest.RegistrationHarness{
		NewClient: func(t *testing.T) (func(context.Context, subscriber.Key, subscriber.Instance) (subscriber.Registration, error), func()) {
			client := newNamingClient(t)
			return func(ctx context.Context, k subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
				g, err := nacos.Register(ctx, client, k, inst, append(fastRegister, nacos.WithCheckInterval(300*time.Millisecond))...)
				if err != nil {
					return nil, err // not a typed nil in the interface
				}
				return g, nil
			}, client.CloseClient
		},
		NewRegistry: func(t *testing.T) (subscriber.Registry, func()) {
			client := newNamingClient(t)
			reg, err := nacos.New(client)
			if err != nil {
				client.CloseClient()
				t.Fatal(err)
			}
			return reg, func() {
				reg.Close()
				client.CloseClient()
			}
		},
		Listed: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) bool {
			for _, in := range srv.Instances(k.Namespace, k.Group, k.Service) {
				if in.Ip == inst.IP && in.Port == inst.Port {
					return true
				}
			}
			return false
		},
		Lose: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			if n := srv.ForgetClientInstances(k.Namespace, k.Group, k.Service, inst.IP, inst.Port); n == 0 {
				t.Fatalf("ForgetClientInstances found no %s:%d", inst.IP, inst.Port)
			}
		},
		Stop: func(t *testing.T) { srv.Stop() },
		Start: func(t *testing.T) {
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
		},
		Leaks: nacostest.SDKLeaks(),
	})
}
