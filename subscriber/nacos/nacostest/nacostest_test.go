package nacostest_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func TestRegisterSubscribeDeregister(t *testing.T) {
	srv := newServer(t)
	provider := newClient(t, srv, "")
	consumer := newClient(t, srv, "")

	mustRegister(t, provider, registerParam("orders", "10.0.0.1", 8080))
	if got := srv.Instances("", "", "orders"); len(got) != 1 || got[0].Ip != "10.0.0.1" || got[0].ClusterName != nacostest.DefaultCluster {
		t.Fatalf("server instances = %+v, want 10.0.0.1:8080 in cluster DEFAULT", got)
	}

	var rec recorder
	if err := consumer.Subscribe(&vo.SubscribeParam{ServiceName: "orders", SubscribeCallback: rec.callback}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	got := rec.waitAddrs(t, "10.0.0.1:8080")
	in := got[0]
	if in.ServiceName != "DEFAULT_GROUP@@orders" || !in.Enable || !in.Healthy || in.Weight != 1 || !in.Ephemeral || in.ClusterName != "DEFAULT" {
		t.Errorf("delivered instance = %+v", in)
	}
	if n := srv.SubscriberCount("public", "DEFAULT_GROUP", "orders"); n != 1 {
		t.Errorf("SubscriberCount = %d, want 1", n)
	}

	// A second provider appears: pushed.
	other := newClient(t, srv, "")
	mustRegister(t, other, registerParam("orders", "10.0.0.2", 8080))
	rec.waitAddrs(t, "10.0.0.1:8080", "10.0.0.2:8080")

	// Deregistration: pushed; the empty list is delivered too
	// (UpdateCacheWhenEmpty).
	for _, c := range []struct {
		name string
		ip   string
	}{{"provider", "10.0.0.1"}, {"other", "10.0.0.2"}} {
		cl := provider
		if c.name == "other" {
			cl = other
		}
		ok, err := cl.DeregisterInstance(vo.DeregisterInstanceParam{ServiceName: "orders", Ip: c.ip, Port: 8080, Ephemeral: true})
		if err != nil || !ok {
			t.Fatalf("%s: DeregisterInstance = %v, %v", c.name, ok, err)
		}
	}
	rec.waitAddrs(t)
	if got := srv.Instances("", "", "orders"); len(got) != 0 {
		t.Errorf("server instances after deregistration = %+v", got)
	}
	st := srv.Stats()
	// >= because the SDK's start-up redo may send a registration twice.
	if st.Requests[nacostest.RequestInstance] < 4 || st.Requests[nacostest.RequestSubscribeService] < 1 {
		t.Errorf("request counts = %v", st.Requests)
	}
	eventually(t, "every push acknowledged", func() bool {
		st := srv.Stats()
		return st.Pushes >= 2 && st.PushAcks == st.Pushes
	})
}

func TestServerSideRegistrationIsPushed(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "dev")

	var rec recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "pay", GroupName: "g1", SubscribeCallback: rec.callback}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	rec.waitAddrs(t) // the initial, empty list

	// Another namespace and another group are other services.
	for _, ns := range []string{"", "other"} {
		if err := srv.RegisterInstance(ns, "g1", "pay", nacostest.Instance{Ip: "10.9.9.9", Port: 1, Enable: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.RegisterInstance("dev", "g2", "pay", nacostest.Instance{Ip: "10.9.9.9", Port: 2, Enable: true}); err != nil {
		t.Fatal(err)
	}

	if err := srv.RegisterInstance("dev", "g1", "pay", nacostest.Instance{
		Ip: "10.1.1.1", Port: 9000, Weight: 2, Healthy: true, Enable: true, Metadata: map[string]string{"zone": "a"},
	}); err != nil {
		t.Fatal(err)
	}
	got := rec.waitAddrs(t, "10.1.1.1:9000")
	if got[0].Metadata["zone"] != "a" || got[0].Weight != 2 || got[0].ServiceName != "g1@@pay" {
		t.Errorf("delivered %+v", got[0])
	}

	// Disabled instances are stored but hidden from subscribers, as in Nacos.
	if err := srv.RegisterInstance("dev", "g1", "pay", nacostest.Instance{Ip: "10.1.1.2", Port: 9000, Healthy: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Instances("dev", "g1", "pay")); n != 2 {
		t.Errorf("server holds %d instances, want 2", n)
	}

	// Re-registering the same ip:port:cluster replaces it.
	if err := srv.RegisterInstance("dev", "g1", "pay", nacostest.Instance{Ip: "10.1.1.1", Port: 9000, Weight: 5, Healthy: true, Enable: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "weight 5 delivered", func() bool {
		_, last := rec.snapshot()
		return len(last) == 1 && last[0].Weight == 5
	})

	if !srv.DeregisterInstance("dev", "g1", "pay", nacostest.Instance{Ip: "10.1.1.1", Port: 9000}) {
		t.Fatal("DeregisterInstance reported nothing removed")
	}
	if srv.DeregisterInstance("dev", "g1", "pay", nacostest.Instance{Ip: "10.1.1.1", Port: 9000}) {
		t.Fatal("second DeregisterInstance reported a removal")
	}
	rec.waitAddrs(t)
}

func TestClusterSubscription(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	for _, in := range []nacostest.Instance{
		{Ip: "10.0.0.1", Port: 1, ClusterName: "a", Enable: true},
		{Ip: "10.0.0.2", Port: 1, ClusterName: "b", Enable: true},
		{Ip: "10.0.0.3", Port: 1, ClusterName: "c", Enable: true},
		{Ip: "10.0.0.4", Port: 1, Enable: true}, // DEFAULT
	} {
		if err := srv.RegisterInstance("", "", "svc", in); err != nil {
			t.Fatal(err)
		}
	}
	var ab, all recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", Clusters: []string{"a", "b"}, SubscribeCallback: ab.callback}); err != nil {
		t.Fatal(err)
	}
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: all.callback}); err != nil {
		t.Fatal(err)
	}
	ab.waitAddrs(t, "10.0.0.1:1", "10.0.0.2:1")
	all.waitAddrs(t, "10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1")
	if n := srv.SubscriberCount("", "", "svc"); n != 2 {
		t.Errorf("SubscriberCount = %d, want 2 (one per clusters string)", n)
	}

	// A change in cluster c reaches only the unfiltered subscription.
	srv.DeregisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.3", Port: 1, ClusterName: "c"})
	all.waitAddrs(t, "10.0.0.1:1", "10.0.0.2:1", "10.0.0.4:1")
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.5", Port: 1, ClusterName: "b", Enable: true}); err != nil {
		t.Fatal(err)
	}
	ab.waitAddrs(t, "10.0.0.1:1", "10.0.0.2:1", "10.0.0.5:1")

	// The SDK's own cache key uses the same clusters string.
	ins, err := client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: "svc", Clusters: []string{"a", "b"}})
	if err != nil || len(ins) != 3 {
		t.Errorf("SelectAllInstances(a,b) = %d instances, %v", len(ins), err)
	}
}

func TestClosedClientsInstancesAreRemoved(t *testing.T) {
	srv := newServer(t)
	provider := newClient(t, srv, "")
	consumer := newClient(t, srv, "")
	mustRegister(t, provider, registerParam("svc", "10.0.0.1", 80))

	var rec recorder
	if err := consumer.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback}); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(t, "10.0.0.1:80")
	if n := srv.ConnectionCount(); n != 2 {
		t.Errorf("ConnectionCount = %d, want 2", n)
	}

	provider.CloseClient()
	rec.waitAddrs(t)
	eventually(t, "one connection left", func() bool { return srv.ConnectionCount() == 1 })
}

func TestBatchRegister(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	var rec recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "batch", SubscribeCallback: rec.callback}); err != nil {
		t.Fatal(err)
	}
	ok, err := client.BatchRegisterInstance(vo.BatchRegisterInstanceParam{
		ServiceName: "batch",
		Instances:   []vo.RegisterInstanceParam{registerParam("batch", "10.0.0.1", 1), registerParam("batch", "10.0.0.2", 2)},
	})
	if err != nil || !ok {
		t.Fatalf("BatchRegisterInstance = %v, %v", ok, err)
	}
	rec.waitAddrs(t, "10.0.0.1:1", "10.0.0.2:2")
	// Replacement semantics (one publication per connection and service)
	// are checked on the wire in TestPublicationSemantics: through the SDK,
	// two registrations issued right after NewNamingClient may be applied
	// out of order, because the SDK's start-up redo can re-send a stale
	// snapshot of its registration cache.
}

func TestServiceList(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	for _, name := range []string{"c", "a", "b"} {
		if err := srv.RegisterInstance("", "", name, nacostest.Instance{Ip: "10.0.0.1", Port: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.RegisterInstance("", "other", "z", nacostest.Instance{Ip: "10.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	list, err := client.GetAllServicesInfo(vo.GetAllServiceInfoParam{PageNo: 1, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if list.Count != 3 || strings.Join(list.Doms, ",") != "a,b" {
		t.Errorf("page 1 = %+v, want count 3, [a b]", list)
	}
	list, err = client.GetAllServicesInfo(vo.GetAllServiceInfoParam{PageNo: 2, PageSize: 2})
	if err != nil || strings.Join(list.Doms, ",") != "c" {
		t.Errorf("page 2 = %+v, %v, want [c]", list, err)
	}
}

func TestUnsubscribe(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	var rec recorder
	param := &vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback}
	if err := client.Subscribe(param); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(t)
	// Unsubscribe needs the same *SubscribeParam: the SDK removes the
	// callback by the address of param.SubscribeCallback.
	if err := client.Unsubscribe(param); err != nil {
		t.Fatal(err)
	}
	if n := srv.SubscriberCount("", "", "svc"); n != 0 {
		t.Fatalf("SubscriberCount after Unsubscribe = %d", n)
	}
	pushes := srv.Stats().Pushes
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Stats().Pushes; got != pushes {
		t.Errorf("pushes went from %d to %d after unsubscribing", pushes, got)
	}
}

func TestDelay(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	const d = 200 * time.Millisecond
	srv.SetDelay(d)
	start := time.Now()
	var rec recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback}); err != nil {
		t.Fatalf("Subscribe with a %v delay (below the client's 1 s timeout): %v", d, err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("Subscribe took %v, less than the %v delay", took, d)
	}
	srv.SetDelay(0)
}

func TestRefusedClientIsNotConnected(t *testing.T) {
	srv := newServer(t)
	srv.SetRefuseConnections(true)
	client := newClient(t, srv, "")
	if client.ServerHealthy() {
		t.Fatal("client reports healthy while the server refuses connections")
	}
	var rec recorder
	err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback})
	if err == nil || !strings.Contains(err.Error(), "client not connected") {
		t.Fatalf("Subscribe error = %s, want client not connected", errText(err))
	}
	if st := srv.Stats(); st.ConnectionsRefused < 3 || st.ConnectionsOpened != 0 || st.Connections != 0 {
		t.Errorf("stats = %+v, want >= 3 refused (the SDK's start-up attempts), none opened", st)
	}
}

func TestRequestHookAndStats(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := newServer(t, nacostest.WithRequestHook(func(typ string) {
		mu.Lock()
		seen[typ]++
		mu.Unlock()
	}))
	client := newClient(t, srv, "")
	var rec recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, client, registerParam("svc", "10.0.0.1", 1))
	rec.waitAddrs(t, "10.0.0.1:1")

	st := srv.Stats()
	mu.Lock()
	defer mu.Unlock()
	for _, typ := range []string{nacostest.RequestServerCheck, nacostest.RequestConnectionSetup, nacostest.RequestSubscribeService, nacostest.RequestInstance} {
		if seen[typ] < 1 || int64(seen[typ]) != st.Requests[typ] {
			t.Errorf("%s: hook saw %d, stats say %d", typ, seen[typ], st.Requests[typ])
		}
	}
	var total int64
	for _, n := range st.Requests {
		total += n
	}
	if total != st.TotalRequests {
		t.Errorf("TotalRequests = %d, sum of Requests = %d", st.TotalRequests, total)
	}
	if st.ConnectionsOpened != 1 || st.Connections != 1 {
		t.Errorf("connections: opened %d, open %d, want 1 and 1", st.ConnectionsOpened, st.Connections)
	}
	srv.ResetStats()
	if st := srv.Stats(); st.TotalRequests != 0 || len(st.Requests) != 0 || st.Pushes != 0 {
		t.Errorf("after ResetStats: %+v", st)
	}
}

func TestStopStartLifecycle(t *testing.T) {
	srv := newServer(t)
	addr := srv.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || srv.GRPCPort() == 0 {
		t.Fatalf("Addr = %q, GRPCPort = %d", addr, srv.GRPCPort())
	}
	if p := srv.GRPCPort(); p > 1000 && srv.HTTPPort() != p-1000 {
		t.Errorf("HTTPPort = %d, want GRPCPort-1000 = %d", srv.HTTPPort(), p-1000)
	}
	sc := srv.ServerConfig()
	if sc.IpAddr != "127.0.0.1" || sc.GrpcPort != srv.GRPCPort() || sc.Port != srv.HTTPPort() {
		t.Errorf("ServerConfig = %+v", sc)
	}
	if err := srv.Start(); !errors.Is(err, nacostest.ErrRunning) {
		t.Errorf("Start on a running server = %v, want ErrRunning", err)
	}
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Stop() // idempotent
	if srv.Running() {
		t.Error("Running after Stop")
	}
	if got := srv.Instances("", "", "svc"); len(got) != 0 {
		t.Errorf("instances survived Stop: %+v", got)
	}
	// Seeding while stopped survives Start.
	if err := srv.RegisterInstance("", "", "seed", nacostest.Instance{Ip: "10.0.0.2", Port: 2}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if srv.Addr() != addr || !srv.Running() {
		t.Errorf("after Start: Addr = %q (was %q), Running = %v", srv.Addr(), addr, srv.Running())
	}
	if got := srv.Instances("", "", "seed"); len(got) != 1 {
		t.Errorf("seeded instances = %+v", got)
	}

	srv.Close()
	srv.Close() // idempotent
	srv.Stop()  // no-op
	if err := srv.Start(); !errors.Is(err, nacostest.ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  nacostest.Option
		want string
	}{
		{"no port", nacostest.WithAddr("127.0.0.1"), "WithAddr"},
		{"bad port", nacostest.WithAddr("127.0.0.1:http"), "port"},
		{"ipv6", nacostest.WithAddr("[::1]:0"), "IPv4"},
		{"hostname", nacostest.WithAddr("example.invalid:0"), "IPv4"},
		{"cache millis", nacostest.WithCacheMillis(0), "WithCacheMillis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := nacostest.NewServer(tc.opt)
			if err == nil {
				srv.Close()
				t.Fatal("NewServer succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	srv := newServer(t)
	for _, tc := range []struct {
		service string
		inst    nacostest.Instance
		want    string
	}{
		{"", nacostest.Instance{Ip: "10.0.0.1"}, "service name"},
		{"svc", nacostest.Instance{}, "Ip"},
		{"svc", nacostest.Instance{Ip: "10.0.0.1", Port: 70000}, "Port"},
	} {
		if err := srv.RegisterInstance("", "", tc.service, tc.inst); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RegisterInstance(%q, %+v) = %v, want an error about %s", tc.service, tc.inst, err, tc.want)
		}
	}
	if err := srv.SetRequestError("", 500); err == nil {
		t.Error("SetRequestError with an empty type succeeded")
	}
}

func TestLocalhostAddr(t *testing.T) {
	srv := newServer(t, nacostest.WithAddr("localhost:0"), nacostest.WithCacheMillis(time.Second))
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Errorf("Addr = %q", srv.Addr())
	}
}

// TestManyClients is a small version of the outage demo's load: several
// clients with several subscriptions each, all receiving one change.
func TestManyClients(t *testing.T) {
	const clients, subs = 4, 10
	srv := newServer(t)
	var delivered atomic.Int64
	for range clients {
		c := newClient(t, srv, "")
		for j := range subs {
			name := "svc-" + string(rune('a'+j))
			err := c.Subscribe(&vo.SubscribeParam{ServiceName: name, SubscribeCallback: func(ins []nacostest.Instance, _ error) {
				if len(ins) == 1 {
					delivered.Add(1)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for j := range subs {
		if err := srv.RegisterInstance("", "", "svc-"+string(rune('a'+j)), nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every subscription sees the instance", func() bool { return delivered.Load() == clients*subs })
}
