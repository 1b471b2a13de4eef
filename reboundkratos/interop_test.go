package reboundkratos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The contrib registries' wire formats, written and read here the way
// their source does (the module proxy does not serve them): a process on
// the contrib registry and one on reboundkratos see each other.

// TestInteropEtcd: an instance the contrib etcd registry wrote (the JSON
// of the ServiceInstance at /microservices/<name>/<id> on a lease) is
// what the Discovery hands kratos; an instance the Registrar wrote is
// what the contrib registry reads back.
func TestInteropEtcd(t *testing.T) {
	env := newEtcdEnv(t)
	client := env.client(t)
	ctx := context.Background()

	// contrib writer.
	theirs := &registry.ServiceInstance{ID: "contrib-1", Name: "helloworld", Version: "v0.9",
		Metadata: map[string]string{"a": "b"}, Endpoints: []string{"grpc://127.0.0.1:9100?isSecure=false", "http://127.0.0.1:8100?isSecure=false"}}
	value, _ := json.Marshal(theirs)
	lease, err := client.Grant(ctx, 15)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, "/microservices/helloworld/contrib-1", string(value), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	// rebound writer.
	ours := &registry.ServiceInstance{ID: "rebound-1", Name: "helloworld", Version: "v1.0",
		Metadata: map[string]string{"c": "d"}, Endpoints: []string{"grpc://127.0.0.1:9200?isSecure=false"}}
	r := env.registrar(t)
	if err := r.Register(ctx, ours); err != nil {
		t.Fatal(err)
	}
	defer r.Deregister(ctx, ours)

	// rebound reader sees both, as written.
	d := env.discovery(t)
	var got []*registry.ServiceInstance
	subscribertest.Eventually(t, testTimeout, "both instances", func() bool {
		got, err = d.GetService(ctx, "helloworld")
		return err == nil && len(got) == 2
	})
	byID := map[string]*registry.ServiceInstance{}
	for _, si := range got {
		byID[si.ID] = si
	}
	if !byID["contrib-1"].Equal(theirs) || !byID["rebound-1"].Equal(ours) {
		t.Fatalf("rebound read %+v %+v, want %+v %+v", byID["contrib-1"], byID["rebound-1"], theirs, ours)
	}
	// contrib reader (Get of the prefix, json.Unmarshal of each value).
	resp, err := client.Get(ctx, "/microservices/helloworld", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range resp.Kvs {
		var si registry.ServiceInstance
		if err := json.Unmarshal(kv.Value, &si); err != nil {
			t.Fatalf("contrib reader: %s: %v", kv.Key, err)
		}
		if string(kv.Key) == "/microservices/helloworld/rebound-1" {
			found = si.Equal(ours) && kv.Lease != 0
		}
	}
	if !found {
		t.Fatalf("the contrib reader does not see the Registrar's instance on a lease: %v", resp.Kvs)
	}
}

// TestInteropNacos: an instance registered the way the contrib Nacos
// registry does (service helloworld.grpc, metadata kind and version) is
// what the Discovery hands kratos; the Registrar's instance is what the
// contrib registry's GetService (SelectInstances, HealthyOnly) reads.
func TestInteropNacos(t *testing.T) {
	env := newNacosEnv(t)
	ctx := context.Background()
	// contrib writer.
	theirs := env.client(t)
	if _, err := theirs.RegisterInstance(vo.RegisterInstanceParam{Ip: "127.0.0.1", Port: 9100, ServiceName: "helloworld.grpc",
		Weight: 100, Enable: true, Healthy: true, Ephemeral: true, ClusterName: "DEFAULT", GroupName: "DEFAULT_GROUP",
		Metadata: map[string]string{"kind": "grpc", "version": "v0.9", "a": "b"}}); err != nil {
		t.Fatal(err)
	}
	// rebound writer.
	ours := &registry.ServiceInstance{ID: "rebound-1", Name: "helloworld", Version: "v1.0",
		Metadata: map[string]string{"c": "d"}, Endpoints: []string{"grpc://127.0.0.1:9200?isSecure=false"}}
	r := env.registrar(t)
	if err := r.Register(ctx, ours); err != nil {
		t.Fatal(err)
	}
	defer r.Deregister(ctx, ours)

	d := env.discovery(t)
	var got []*registry.ServiceInstance
	subscribertest.Eventually(t, testTimeout, "both instances", func() bool {
		var err error
		got, err = d.GetService(ctx, "helloworld.grpc")
		return err == nil && len(got) == 2
	})
	want := map[string]string{"grpc://127.0.0.1:9100": "v0.9", "grpc://127.0.0.1:9200": "v1.0"}
	for _, si := range got {
		if len(si.Endpoints) != 1 || want[si.Endpoints[0]] != si.Version || si.Name != "helloworld.grpc" || si.Metadata["kind"] != "grpc" {
			t.Fatalf("rebound read %+v", *si)
		}
	}
	// contrib reader.
	reader := env.client(t)
	var hosts int
	subscribertest.Eventually(t, testTimeout, "the contrib reader sees the Registrar's instance", func() bool {
		res, err := reader.SelectInstances(vo.SelectInstancesParam{ServiceName: "helloworld.grpc", GroupName: "DEFAULT_GROUP", HealthyOnly: true})
		if err != nil {
			return false
		}
		hosts = len(res)
		for _, in := range res {
			if in.Port == 9200 && in.Metadata["kind"] == "grpc" && in.Metadata["version"] == "v1.0" && in.Metadata["c"] == "d" && in.Weight == 100 {
				return true
			}
		}
		return false
	})
	t.Logf("contrib reader: %d instances", hosts)
}
