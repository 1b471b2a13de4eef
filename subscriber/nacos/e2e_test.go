package nacos_test

// End-to-end tests: the subscriber.Manager over the subscriber/nacos adapter over the real
// nacos-sdk-go v2.3.2 client against the in-process server of package
// nacostest. They use real time with bounded deadlines (the SDK's goroutines
// cannot run under testing/synctest). Tests in which the client is
// disconnected or its requests fail are in e2e_reconnect_test.go, excluded
// from -race builds: see there.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap/zaptest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// e2ePolicy keeps the end-to-end tests fast: 100 ms doubling to 1 s.
var e2ePolicy = rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}

// e2eTimeout bounds a wait for a condition, not a timing: on a loaded
// 2-core machine a reconnect and the next check took over 20 s.
const e2eTimeout = 60 * time.Second

func newServer(t *testing.T, opts ...nacostest.Option) *nacostest.Server {
	t.Helper()
	srv, err := nacostest.NewServer(opts...)
	if err != nil {
		t.Fatalf("nacostest.NewServer: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a real naming client on servers, closed at cleanup.
func newClient(t *testing.T, servers ...*nacostest.Server) naming_client.INamingClient {
	t.Helper()
	var cfgs []constant.ServerConfig
	for _, s := range servers {
		cfgs = append(cfgs, s.ServerConfig())
	}
	c, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  nacostest.ClientConfig(t),
		ServerConfigs: cfgs,
	})
	if err != nil {
		t.Fatalf("NewNamingClient: %v", err)
	}
	t.Cleanup(c.CloseClient)
	return c
}

// counting wraps the adapter to count attempts and the lists the adapter
// hands to the Manager.
type counting struct {
	*nacos.Registry
	mu       sync.Mutex
	attempts []time.Time
	updates  int
	sinks    map[subscriber.Sink]*countSink
}

type countSink struct {
	subscriber.Sink
	c *counting
}

func (s *countSink) Update(l []subscriber.Instance) {
	s.c.mu.Lock()
	s.c.updates++
	s.c.mu.Unlock()
	s.Sink.Update(l)
}

func (c *counting) wrap(s subscriber.Sink) *countSink {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sinks == nil {
		c.sinks = map[subscriber.Sink]*countSink{}
	}
	cs, ok := c.sinks[s]
	if !ok {
		cs = &countSink{Sink: s, c: c}
		c.sinks[s] = cs
	}
	return cs
}

func (c *counting) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	c.mu.Lock()
	c.attempts = append(c.attempts, time.Now())
	c.mu.Unlock()
	return c.Registry.Subscribe(ctx, k, c.wrap(s))
}

func (c *counting) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	return c.Registry.Unsubscribe(ctx, k, c.wrap(s))
}

func (c *counting) counts() (attempts, updates int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.attempts), c.updates
}

// newManager builds the stack over client; it is closed at cleanup.
func newManager(t *testing.T, client naming_client.INamingClient, opts ...subscriber.Option) (*subscriber.Manager, *counting) {
	t.Helper()
	log := zaptest.NewLogger(t)
	// A generous evidence window: on a busy machine the SDK's redo can be
	// slow, and a subscription handed back early costs a request (which
	// TestE2ERegistryRestart counts).
	reg, err := nacos.New(client, nacos.WithLogger(log), nacos.WithEvidenceWindow(5*time.Second, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() }) // after the Manager's Close: it ends Lookup's connection
	c := &counting{Registry: reg}
	opts = append([]subscriber.Option{subscriber.WithLogger(log), subscriber.WithPolicy(e2ePolicy)}, opts...)
	m, err := subscriber.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m, c
}

// lists records what a listener receives, as sorted "ip:port" strings.
type lists struct {
	mu    sync.Mutex
	calls [][]string
}

func (l *lists) listen(in []subscriber.Instance) {
	var s []string
	for _, i := range in {
		s = append(s, fmt.Sprintf("%s:%d", i.IP, i.Port))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *lists) get() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func (l *lists) last() []string {
	c := l.get()
	if len(c) == 0 {
		return nil
	}
	return c[len(c)-1]
}

// eventually polls cond every 10 ms until it holds, failing after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	subscribertest.Eventually(t, d, what, cond)
}

func provider(ip string, port uint64) nacostest.Instance {
	return model.Instance{Ip: ip, Port: port, Weight: 1, Healthy: true, Enable: true, Ephemeral: true}
}

func addrs(ins []nacostest.Instance) []string {
	out := []string{}
	for _, i := range ins {
		out = append(out, fmt.Sprintf("%s:%d", i.Ip, i.Port))
	}
	slices.Sort(out)
	return out
}

// The happy path, race-detector clean: subscribe, every change once, in
// order, unsubscribe, close.
func TestE2ESubscribeChangesUnsubscribe(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv)
	eventually(t, e2eTimeout, "the client to connect", client.ServerHealthy)
	m, c := newManager(t, client)
	var got lists
	key := subscriber.Key{Group: "g", Service: "orders", Clusters: []string{"c1", "c2"}}
	sub, err := m.Subscribe(context.Background(), key, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "Ready and the first list", func() bool { return isClosed(sub.Ready()) && len(got.get()) == 1 })
	in := func(ip, cluster string) nacostest.Instance {
		p := provider(ip, 8080)
		p.ClusterName = cluster
		return p
	}
	for i, inst := range []nacostest.Instance{in("10.0.0.1", "c1"), in("10.0.0.2", "c2"), in("10.0.0.3", "other")} {
		if err := srv.RegisterInstance("", "g", "orders", inst); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			eventually(t, e2eTimeout, "the change", func() bool { return len(got.get()) == i+2 })
		}
	}
	// The instance in cluster "other" is not part of the subscription:
	// register one more in c1 and check the whole sequence.
	if err := srv.RegisterInstance("", "g", "orders", in("10.0.0.4", "c1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the last change", func() bool { return len(got.last()) == 3 })
	want := [][]string{{}, {"10.0.0.1:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.4:8080"}}
	if calls := got.get(); !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("listener calls %v, want %v", calls, want)
	}
	// The adapter may report an unchanged list a second time (the SDK's
	// start-up redo can answer while the first Subscribe is in flight);
	// the Manager drops it, so the listener calls above are exact.
	if attempts, updates := c.counts(); attempts != 1 || updates < len(want) {
		t.Fatalf("%d attempts and %d lists from the adapter, want 1 and at least %d", attempts, updates, len(want))
	}
	if n := srv.SubscriberCount("", "g", "orders"); n != 1 {
		t.Fatalf("server subscriber count %d, want 1", n)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the server to drop the subscription", func() bool { return srv.SubscriberCount("", "g", "orders") == 0 })
}

// quiet waits until no subscribe attempt happened for a second.
func quiet(t *testing.T, c *counting) {
	t.Helper()
	last, _ := c.counts()
	since := time.Now()
	eventually(t, e2eTimeout, "the subscriptions to settle", func() bool {
		if n, _ := c.counts(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= time.Second
	})
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ourGoroutines lists the goroutines running code of the subscriber
// packages, other than the caller's. A goroutine that a Close has already
// waited for can still be listed for a moment (it called wg.Done and is
// exiting: runtime.goexit1 under "created by ...startClose"), so, like
// goleak, it looks again until none is left or leakWait has passed: a
// goroutine still there after that is a leak.
func ourGoroutines() []string {
	deadline := time.Now().Add(leakWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		g := ourGoroutinesNow()
		if len(g) == 0 || time.Now().After(deadline) {
			return g
		}
		<-tick.C
	}
}

// leakWait bounds how long ourGoroutines waits for exiting goroutines.
const leakWait = 5 * time.Second

func ourGoroutinesNow() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller
			continue
		}
		if strings.Contains(g, "rebound-go/rebound/subscriber.") || strings.Contains(g, "rebound-go/rebound/subscriber/nacos.") {
			out = append(out, g)
		}
	}
	return out
}

// connectHandled waits until nacos-sdk-go has handled the connect event of
// its start (RpcClient.Start sends it to a goroutine that runs the
// listeners): a redo that starts after a Subscribe re-sends it, and its
// reply and push deliver a change the test meant to lose. That goroutine
// is back in its select (not runnable: the event is taken) and no
// goroutine is in notifyConnectionEvent.
func connectHandled(t *testing.T) {
	t.Helper()
	const loop = "common/remote/rpc.(*RpcClient).Start.func1("
	eventually(t, e2eTimeout, "the SDK to handle its connect event", func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "(*RpcClient).notifyConnectionEvent(") ||
				strings.Contains(g, loop) && !strings.Contains(g, " [select") {
				return false
			}
		}
		return true
	})
}

// TestE2EReconcileRepairsSilentLoss: without any connection change, the
// registry loses a push, then forgets the subscriber. Periodic
// reconciliation (WithReconcile over the adapter's Lookup) delivers the
// server's list and resubscribes, so the listener catches up and later
// changes arrive again.
func TestE2EReconcileRepairsSilentLoss(t *testing.T) {
	// The SDK re-queries a service whose info is older than cacheMillis
	// (10 s by default): on a loaded machine that query delivered the lost
	// change before reconciliation, which then found nothing to repair.
	srv := newServer(t, nacostest.WithCacheMillis(time.Hour))
	client := newClient(t, srv)
	eventually(t, e2eTimeout, "the client to connect", client.ServerHealthy)
	connectHandled(t)
	m, _ := newManager(t, client, subscriber.WithReconcile(time.Second))
	var got lists
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.1", 8080)); err != nil {
		t.Fatal(err)
	}
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the first list", func() bool { return slices.Equal(got.last(), []string{"10.0.0.1:8080"}) })
	attempts := sub.Status().TotalAttempts

	// A lost push: the client's cache keeps the old list. (The push that
	// follows the subscribe must be out first, or it would be the one lost.)
	eventually(t, e2eTimeout, "the subscribe push to be sent", func() bool { return srv.PendingPushes() == 0 })
	if n := srv.LoseNextPush("", "", "orders"); n != 1 {
		t.Fatalf("LoseNextPush = %d", n)
	}
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.2", 8080)); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the push to be lost", func() bool { return srv.Stats().PushesLost == 1 })
	eventually(t, e2eTimeout, "reconciliation to deliver the server's list", func() bool {
		return slices.Equal(got.last(), []string{"10.0.0.1:8080", "10.0.0.2:8080"})
	})

	// A server that forgets the subscriber: no push at all any more.
	eventually(t, e2eTimeout, "the resubscription after the lost push", func() bool {
		st := sub.Status()
		return st.TotalAttempts > attempts && st.State == subscriber.StateSubscribed && srv.SubscriberCount("", "", "orders") == 1
	})
	if n := srv.ForgetSubscribers("", "", "orders"); n != 1 {
		t.Fatalf("ForgetSubscribers = %d", n)
	}
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.3", 8080)); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "reconciliation to repair a forgotten subscriber", func() bool {
		return slices.Equal(got.last(), []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}) &&
			srv.SubscriberCount("", "", "orders") == 1
	})
	// Pushes work again.
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.4", 8080)); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the next change by push", func() bool { return len(got.last()) == 4 })
	if q := srv.Stats().Requests[nacostest.RequestServiceQuery]; q < 2 {
		t.Errorf("%d ServiceQueryRequests (Lookups), want at least 2", q)
	}
}
