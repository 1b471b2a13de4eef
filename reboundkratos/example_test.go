package reboundkratos_test

import (
	"context"
	"fmt"

	"github.com/go-kratos/kratos/v2/registry"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A Discovery over a Manager; with a real registry, the Manager's
// Registry is nacos.New(namingClient) or etcd.New(client,
// etcd.WithLayout(reboundkratos.EtcdLayout(""))), and the Discovery goes to
// kratos' client: grpc.DialInsecure(ctx,
// grpc.WithEndpoint("discovery:///helloworld.grpc"), grpc.WithDiscovery(d)).
func ExampleNewDiscovery() {
	reg := subscribertest.New() // an in-memory registry
	reg.Set(subscriber.Key{Service: "helloworld.grpc"}, subscriber.Instance{ID: "i1", IP: "10.0.0.1", Port: 9000,
		Weight: 100, Healthy: true, Enabled: true, Metadata: map[string]string{"kind": "grpc", "version": "v1"}})
	m, _ := subscriber.New(reg)
	defer m.Close()
	d, _ := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos)
	defer d.Close()

	w, _ := d.Watch(context.Background(), "helloworld.grpc") // returns at once
	defer w.Stop()
	list, _ := w.Next() // the first list
	for _, si := range list {
		fmt.Println(si.ID, si.Version, si.Endpoints)
	}
	// Output: i1 v1 [grpc://10.0.0.1:9000]
}

// A Registrar writing the contrib Nacos layout: one instance per endpoint
// in service "<name>.<scheme>", kind and version in the metadata. With a
// real registry the RegisterFunc calls nacos.Register or etcd.Register.
func ExampleNewRegistrar() {
	register := func(_ context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
		fmt.Println("register", key.Service, inst.IP, inst.Port, inst.Metadata["kind"], inst.Metadata["version"])
		return &printReg{}, nil
	}
	r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, register, reboundkratos.WithDrainDelay(0))
	si := &registry.ServiceInstance{ID: "a1", Name: "helloworld", Version: "v1",
		Endpoints: []string{"grpc://10.0.0.1:9000?isSecure=false", "http://10.0.0.1:8000?isSecure=false"}}
	_ = r.Register(context.Background(), si)   // kratos.App.Run does this
	_ = r.Deregister(context.Background(), si) // kratos.App.Stop does this
	// Output:
	// register helloworld.grpc 10.0.0.1 9000 grpc v1
	// register helloworld.http 10.0.0.1 8000 http v1
	// deregister
	// deregister
}

type printReg struct{ subscriber.Registration }

func (*printReg) Shutdown(context.Context) error { fmt.Println("deregister"); return nil }
func (*printReg) Close() error                   { return nil }
func (*printReg) Key() subscriber.Key            { return subscriber.Key{} }
