package reboundkratos_test

import (
	"context"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

type nacosEnv struct {
	srv *nacostest.Server
	m   *subscriber.Manager // the last discovery's
}

func newNacosEnv(t *testing.T) *nacosEnv {
	t.Helper()
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &nacosEnv{srv: srv}
}

func (e *nacosEnv) client(t testing.TB) naming_client.INamingClient {
	t.Helper()
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  nacostest.ClientConfig(t),
		ServerConfigs: []constant.ServerConfig{e.srv.ServerConfig()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseClient)
	return client
}

// registrar is a provider process's Registrar in the contrib Nacos
// layout, over its own SDK client and nacos.Register.
func (e *nacosEnv) registrar(t testing.TB) *reboundkratos.Registrar {
	t.Helper()
	client := e.client(t)
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos,
		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
			return nacos.Register(ctx, client, key, inst,
				nacos.WithPolicy(fastPolicy))
		}, reboundkratos.WithDrainDelay(testDrain), reboundkratos.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// discovery is a consumer process's Discovery in the contrib Nacos
// layout: its own SDK client, the adapter, a Manager.
func (e *nacosEnv) discovery(t testing.TB) *reboundkratos.Discovery {
	t.Helper()
	reg, err := nacos.New(e.client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	m, err := subscriber.New(reg, subscriber.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.m = m
	d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestKratosNacosChurnAndStop: kratos apps registered in the contrib
// Nacos layout (service helloworld.grpc), a kratos gRPC client dialling
// discovery:///helloworld.grpc: a new provider is reached, and App.Stop
// of one of 3 providers under load (200 RPC/s) costs no RPC.
func TestKratosNacosChurnAndStop(t *testing.T) {
	env := newNacosEnv(t)
	p1 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	p2 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	d := env.discovery(t)
	cc := dialKratos(t, d, "helloworld.grpc")
	waitProviders(t, cc, p1, p2)
	p3 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	waitProviders(t, cc, p1, p2, p3)

	load := startLoad(t, cc)
	subscribertest.Eventually(t, testTimeout, "load on p1", func() bool { return load.count(p1.addr) > 10 })
	p1.stop(t)
	before := load.ok.Load()
	subscribertest.Eventually(t, testTimeout, "400 RPCs after the stop", func() bool { return load.ok.Load() > before+400 })
	load.stop()
	t.Logf("App.Stop: %d RPCs ok, %d failed; discovery %+v", load.ok.Load(), load.failed.Load(), reboundkratos.ViewStats(d))
	if n := load.failed.Load(); n > 0 {
		t.Fatalf("%d RPCs failed through App.Stop of one of 3 providers (first: %v)", n, load.firstErr.Load())
	}
	if n := load.count(p2.addr) + load.count(p3.addr); n == 0 {
		t.Fatal("no RPC reached the remaining providers")
	}
}
