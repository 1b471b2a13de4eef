package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// TestEndpointsLayoutReadsEndpointsManager: providers registered with
// etcd's own endpoints.Manager (on a lease, as its docs show) are read
// through a Registry with EndpointsLayout, changes and deletes included;
// and a Registration with EndpointsLayout is listed by endpoints.Manager.
func TestEndpointsLayoutReadsEndpointsManager(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	const target = "my-service"
	em, err := endpoints.NewManager(cli, target)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(context.Background(), 30)
	if err != nil {
		t.Fatal(err)
	}
	add := func(key, addr string, md any) {
		t.Helper()
		if err := em.AddEndpoint(context.Background(), target+"/"+key, endpoints.Endpoint{Addr: addr, Metadata: md},
			clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "10.0.0.1:80", map[string]any{"zone": "z1", "weight": 3})
	add("b", "10.0.0.2:80", nil)

	m := newManager(t, newRegistry(t, cli, etcdreg.WithLayout(etcdreg.EndpointsLayout(nil))), subscriber.WithEmptyListHold(0))
	var rec recorder
	if _, err := m.Subscribe(context.Background(), subscriber.Key{Service: target}, rec.listener); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80")
	for _, in := range rec.all()[len(rec.all())-1] {
		if in.IP == "10.0.0.1" {
			if in.ID != "a" || in.Metadata["zone"] != "z1" || in.Metadata["weight"] != "3" || !in.Healthy || !in.Enabled || in.Weight != 1 {
				t.Fatalf("instance a = %+v", in)
			}
		}
	}
	add("c", "10.0.0.3:80", "free text")
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80")
	if err := em.DeleteEndpoint(context.Background(), target+"/b"); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:80,10.0.0.3:80")
	if _, err := cli.Revoke(context.Background(), lease.ID); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "")

	// The other way: a rebound Registration in the endpoints layout is an
	// endpoint for etcd's own tools (and its gRPC resolver).
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(context.Background(), cli, subscriber.Key{Service: target},
			subscriber.Instance{IP: "10.0.0.9", Port: 90, Weight: 1, Healthy: true, Enabled: true, Metadata: map[string]string{"v": "2"}},
			etcdreg.WithLayout(etcdreg.EndpointsLayout(nil)))
	})
	if want := target + "/10.0.0.9:90"; g.InstanceKey() != want {
		t.Fatalf("Key() = %q, want %q", g.InstanceKey(), want)
	}
	list, err := em.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := list[g.InstanceKey()]
	if md, _ := ep.Metadata.(map[string]any); !ok || ep.Addr != "10.0.0.9:90" || md["v"] != "2" || len(list) != 1 {
		t.Fatalf("endpoints.Manager lists %+v, want the registration at 10.0.0.9:90 with its metadata", list)
	}
	rec.waitLast(t, "10.0.0.9:90")

	// Lookup reads the same, from the server.
	r := newRegistry(t, cli, etcdreg.WithLayout(etcdreg.EndpointsLayout(nil)))
	got, err := r.Lookup(context.Background(), subscriber.Key{Service: target})
	if err != nil || addrs(got) != "10.0.0.9:90" {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
}

func TestEndpointsLayoutKeys(t *testing.T) {
	l := etcdreg.EndpointsLayout(nil)
	if p, err := l.ServicePrefix(subscriber.Key{Service: "a/b"}); err != nil || p != "a/b/" {
		t.Errorf("ServicePrefix(a/b) = %q, %v", p, err)
	}
	for _, k := range []subscriber.Key{{}, {Service: "x/"}, {Service: "x", Group: "g"}, {Service: "x", Namespace: "n"}} {
		if _, err := l.ServicePrefix(k); err == nil {
			t.Errorf("ServicePrefix(%+v) succeeded", k)
		}
	}
	for _, bad := range []string{"", "{}", `{"Op":1,"Addr":"x:1"}`, `{"Addr":""}`} {
		if _, err := l.Decode("k", []byte(bad)); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
	in, err := l.Decode("k/deeper", []byte(`{"Op":0,"Addr":"host-without-port"}`))
	if err != nil || in.IP != "host-without-port" || in.Port != 0 || in.ID != "k/deeper" {
		t.Errorf("Decode = %+v, %v", in, err)
	}
}

// TestReconcileOverEtcd: with the Manager's periodic reconciliation on,
// each subscription costs one Range (Lookup) per period and nothing else
// while nothing changes.
func TestReconcileOverEtcd(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	put(t, cli, orders, inst("10.0.0.1", 80))
	m := newManager(t, newRegistry(t, cli), subscriber.WithReconcile(time.Second))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	<-sub.Ready()
	c.ResetStats()
	window := time.NewTimer(5 * time.Second)
	<-window.C
	st := c.Stats().Requests
	t.Logf("5 s with a 1 s reconcile period: %d Range, %d Watch.Create, %d lists delivered", st[etcdtest.RequestRange], st[etcdtest.RequestWatchCreate], rec.count())
	if n := st[etcdtest.RequestRange]; n < 2 || n > 8 {
		t.Fatalf("%d Range requests in 5 s at a 1 s period, want about 5: %v", n, st)
	}
	if st[etcdtest.RequestWatchCreate] != 0 {
		t.Fatalf("reconciliation without a difference resubscribed: %v", st)
	}
}
