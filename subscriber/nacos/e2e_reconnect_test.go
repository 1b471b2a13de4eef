//go:build !race

package nacos_test

// These end-to-end tests disconnect the nacos-sdk-go client or make its
// requests fail, which trips two data races inside nacos-sdk-go v2.3.2
// itself, so they are excluded from -race builds:
//   - rpc_client.go reconnect writes RpcClient.currentConnection while
//     notifyConnectionEvent and Request read it (upstream issue 833);
//   - RpcClient.Request formats "client not connected, current status:%s"
//     with a plain read of rpcClientStatus while other requests and the
//     reconnect goroutine change it with atomic operations.
// Neither race involves this module's code; the rest of the package,
// including e2e_test.go, runs under -race.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// Exactly once: after K failed attempts (server errors on every
// SubscribeServiceRequest), each change reaches the adapter's sink once and
// the listener once.
func TestE2EExactlyOnceAfterFailures(t *testing.T) {
	const k = 5
	srv := newServer(t)
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.1", 8080)); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRequestError(nacostest.RequestSubscribeService, 500); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, srv)
	m, c := newManager(t, client)
	var got lists
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, fmt.Sprintf("%d failed attempts", k), func() bool { return sub.Status().TotalAttempts >= k })
	if st := sub.Status(); st.State != subscriber.StateRetrying || st.LastErr == nil {
		t.Fatalf("status with server errors: %+v", st)
	}
	srv.ClearFaults()
	eventually(t, e2eTimeout, "the subscription to be confirmed", func() bool {
		return isClosed(sub.Ready()) && slices.Equal(got.last(), []string{"10.0.0.1:8080"})
	})
	// Let reconnect reports caused by the failures settle: no attempt for 1 s.
	quiet(t, c)
	attempts0, updates0 := c.counts()
	for i, ip := range []string{"10.0.0.2", "10.0.0.3"} {
		if err := srv.RegisterInstance("", "", "orders", provider(ip, 8080)); err != nil {
			t.Fatal(err)
		}
		want := len(srv.Instances("", "", "orders"))
		eventually(t, e2eTimeout, "the change to reach the listener", func() bool { return len(got.last()) == want })
		attempts, updates := c.counts()
		if attempts != attempts0 {
			t.Fatalf("unexpected subscribe attempts during the test (%d -> %d)", attempts0, attempts)
		}
		if updates-updates0 != i+1 {
			t.Fatalf("%d lists from the adapter for %d changes: the SDK holds more than one callback", updates-updates0, i+1)
		}
	}
	want := [][]string{{"10.0.0.1:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}}
	if calls := got.get(); !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("listener calls %v, want %v", calls, want)
	}
}

// Close during an outage returns promptly and leaves no goroutine of ours.
func TestE2ECloseDuringOutage(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv := newServer(t)
	srv.SetRefuseConnections(true) // the client never connects
	client := newClient(t, srv)
	log := zaptest.NewLogger(t)
	reg, err := nacos.New(client, nacos.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	m, err := subscriber.New(reg, subscriber.WithLogger(log), subscriber.WithPolicy(e2ePolicy))
	if err != nil {
		t.Fatal(err)
	}
	var subs []*subscriber.Subscription
	for i := range 20 {
		s, err := m.Subscribe(context.Background(), subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	eventually(t, e2eTimeout, "every subscription to be retrying", func() bool {
		for _, s := range subs {
			if s.Status().TotalAttempts < 2 {
				return false
			}
		}
		return true
	})
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// An attempt in flight takes the SDK about 3 x 100 ms while
	// disconnected; Close waits for it and for the Unsubscribe calls,
	// which run concurrently.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v during an outage", d)
	}
	if g := ourGoroutines(); len(g) > 0 {
		t.Fatalf("goroutines of ours left after Close:\n%s", strings.Join(g, "\n\n"))
	}
	client.CloseClient()
	srv.Close()
	nacostest.VerifyNone(t, ignore)
}

// registerProvider registers an ephemeral instance through a provider
// client of its own (re-registered by the SDK after reconnects).
func registerProvider(t *testing.T, client interface {
	RegisterInstance(vo.RegisterInstanceParam) (bool, error)
}, service, ip string) {
	t.Helper()
	eventually(t, e2eTimeout, "the provider to register", func() bool {
		ok, err := client.RegisterInstance(vo.RegisterInstanceParam{
			Ip: ip, Port: 8080, ServiceName: service, Weight: 1, Enable: true, Healthy: true, Ephemeral: true,
		})
		return err == nil && ok
	})
}

// maxAttempts is the most attempts p allows in d when every delay is at
// least half its ceiling (EqualJitter), ignoring the time attempts take.
func maxAttempts(p rebound.Policy, d time.Duration) int {
	p.Jitter = rebound.NoJitter // its delays are the ceilings
	ceilings := p.NewBackOff()
	n, elapsed := 1, time.Duration(0)
	for {
		elapsed += ceilings.NextBackOff() / 2
		if elapsed > d {
			return n
		}
		n++
	}
}

// noEmptyAfterFirst checks last-known-good: once a non-empty list was
// delivered, no empty list follows.
func noEmptyAfterFirst(t *testing.T, calls [][]string) {
	t.Helper()
	seen := false
	for _, c := range calls {
		if len(c) > 0 {
			seen = true
		} else if seen {
			t.Fatalf("an empty list was delivered after a non-empty one: %v", calls)
		}
	}
}

// 1. Registry down at start: Subscribe returns at once, the loop retries
// with growing jittered delays (bounded count), and once the server is up
// and a provider registers, Ready closes and the listener gets it.
func TestE2ERegistryDownAtStart(t *testing.T) {
	srv := newServer(t)
	srv.Stop()
	client := newClient(t, srv)
	p := rebound.Policy{Initial: 200 * time.Millisecond, Max: time.Second, Jitter: rebound.EqualJitter}
	m, c := newManager(t, client, subscriber.WithPolicy(p))
	var got lists
	start := time.Now()
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Subscribe took %v with the registry down; it must return at once", d)
	}
	const outage = 6 * time.Second
	outageTimer := time.NewTimer(outage)
	<-outageTimer.C // the outage lasts this long
	attempts, _ := c.counts()
	// +1: the connection monitor's initial Disconnected restarts the loop
	// (with a fresh backoff) once.
	if bound := maxAttempts(p, outage) + 1; attempts < 3 || attempts > bound {
		t.Fatalf("%d attempts in a %v outage; the policy allows 3..%d", attempts, outage, bound)
	}
	if isClosed(sub.Ready()) || sub.Status().State != subscriber.StateRetrying {
		t.Fatalf("ready or not retrying while down: %+v", sub.Status())
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	providerClient := newClient(t, srv)
	registerProvider(t, providerClient, "orders", "10.0.0.1")
	// The SDK reconnects within about 1.5 s of such an outage, the monitor
	// polls every second while down, and the loop's next attempt is at
	// most p.Max away.
	bound := 2*time.Second + time.Second + 2*p.Max
	eventually(t, bound+2*time.Second, "Ready", func() bool { return isClosed(sub.Ready()) })
	eventually(t, bound+2*time.Second, "the provider's instance", func() bool {
		return slices.Equal(got.last(), []string{"10.0.0.1:8080"})
	})
	t.Logf("ready %v after the server started; %d attempts during the %v outage",
		time.Since(up).Round(time.Millisecond), attempts, outage)
}

// 2. Registry restart: the provider re-registers, the consumer's
// subscription is confirmed again, listeners keep the last list meanwhile,
// and later changes still arrive.
func TestE2ERegistryRestart(t *testing.T) {
	srv := newServer(t)
	registerProvider(t, newClient(t, srv), "orders", "10.0.0.1")
	consumer := newClient(t, srv)
	m, c := newManager(t, consumer)
	var got lists
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the first list", func() bool { return slices.Equal(got.last(), []string{"10.0.0.1:8080"}) })
	before, _ := c.counts()

	stopped := time.Now()
	srv.Stop()
	eventually(t, e2eTimeout, "the subscription to notice the outage", func() bool {
		return sub.Status().State == subscriber.StateRetrying
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The SDK's redo re-subscribes; the adapter confirms from the SDK's
	// cache (ConfirmedAt) without a Subscribe of its own.
	defer func() {
		if t.Failed() { // which of the conditions below did not hold
			t.Logf("status %+v; server: %d subscribers, instances %v", sub.Status(),
				srv.SubscriberCount("", "", "orders"), srv.Instances("", "", "orders"))
		}
	}()
	eventually(t, e2eTimeout, "re-registration and re-confirmation", func() bool {
		st := sub.Status()
		return st.State == subscriber.StateSubscribed && st.ConfirmedAt.After(stopped) &&
			srv.SubscriberCount("", "", "orders") >= 1 &&
			len(srv.Instances("", "", "orders")) == 1
	})
	if after, _ := c.counts(); after != before {
		t.Errorf("the adapter was asked %d times to subscribe after a clean restart, want 0 (the redo worked)", after-before)
	}
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.2", 8080)); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the change after the restart", func() bool {
		return slices.Equal(got.last(), []string{"10.0.0.1:8080", "10.0.0.2:8080"})
	})
	noEmptyAfterFirst(t, got.get())
}

// 4. Three registry nodes: stopping the node the client is on fails it
// over to another, and no change is lost (the nodes hold the same data,
// as a Nacos cluster's would).
func TestE2EFailover(t *testing.T) {
	nodes := []*nacostest.Server{newServer(t), newServer(t), newServer(t)}
	register := func(ns []*nacostest.Server, ip string) {
		for _, n := range ns {
			if err := n.RegisterInstance("", "", "orders", provider(ip, 8080)); err != nil {
				t.Fatal(err)
			}
		}
	}
	register(nodes, "10.0.0.1")
	client := newClient(t, nodes...)
	m, _ := newManager(t, client)
	var got lists
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the first list", func() bool { return slices.Equal(got.last(), []string{"10.0.0.1:8080"}) })
	var cur *nacostest.Server
	var rest []*nacostest.Server
	for _, n := range nodes {
		if n.ConnectionCount() == 1 {
			cur = n
		} else {
			rest = append(rest, n)
		}
	}
	if cur == nil || len(rest) != 2 {
		t.Fatal("cannot tell which node the client is connected to")
	}
	cur.Stop()
	register(rest, "10.0.0.2") // a change while the client fails over
	eventually(t, e2eTimeout, "failover and the change made during it", func() bool {
		return slices.Equal(got.last(), []string{"10.0.0.1:8080", "10.0.0.2:8080"}) &&
			sub.Status().State == subscriber.StateSubscribed &&
			rest[0].SubscriberCount("", "", "orders")+rest[1].SubscriberCount("", "", "orders") == 1
	})
	register(rest, "10.0.0.3")
	eventually(t, e2eTimeout, "a change after the failover", func() bool { return len(got.last()) == 3 })
	want := [][]string{{"10.0.0.1:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080"}, {"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}}
	if calls := got.get(); !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("listener calls %v, want %v", calls, want)
	}
}

// 5. Flapping: ten down/up cycles, then stable: every subscription
// converges to the server's truth.
func TestE2EFlapping(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv)
	m, _ := newManager(t, client)
	const n = 5
	subs := make([]*subscriber.Subscription, n)
	got := make([]lists, n)
	for i := range subs {
		var err error
		subs[i], err = m.Subscribe(context.Background(), subscriber.Key{Service: fmt.Sprint("svc", i)}, got[i].listen)
		if err != nil {
			t.Fatal(err)
		}
	}
	for cycle := range 10 {
		srv.Stop()
		eventually(t, e2eTimeout, "the client to notice the outage", func() bool { return !client.ServerHealthy() })
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		for i := range n { // the truth changes in every cycle
			if err := srv.RegisterInstance("", "", fmt.Sprint("svc", i), provider(fmt.Sprintf("10.%d.%d.1", i, cycle), 8080)); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, e2eTimeout, "the client to reconnect", client.ServerHealthy)
	}
	eventually(t, e2eTimeout, "every subscription to converge", func() bool {
		for i, s := range subs {
			svc := fmt.Sprint("svc", i)
			if s.Status().State != subscriber.StateSubscribed || srv.SubscriberCount("", "", svc) != 1 ||
				!slices.Equal(got[i].last(), addrs(srv.Instances("", "", svc))) {
				return false
			}
		}
		return true
	})
	for i := range subs {
		noEmptyAfterFirst(t, got[i].get())
		if err := srv.RegisterInstance("", "", fmt.Sprint("svc", i), provider("10.9.9.9", 8080)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, e2eTimeout, "a change after the flapping", func() bool {
		for i := range subs {
			if !slices.Contains(got[i].last(), "10.9.9.9:8080") {
				return false
			}
		}
		return true
	})
}

// TestE2ERestartWithTPSRejections: the restarted registry's TPS control
// rejects the first 4 subscribes of every new connection, in the handler's
// own response type, which nacos-sdk-go reports as success: its redo
// believes every subscription is back. The adapter finds no evidence for
// the rejected ones and hands them back; every subscription ends up held
// by the server and receives the next change. The Manager does not
// re-subscribe the others.
func TestE2ERestartWithTPSRejections(t *testing.T) {
	const n = 10
	srv := newServer(t)
	consumer := newClient(t, srv)
	m, c := newManager(t, consumer)
	svc := func(i int) string { return fmt.Sprintf("svc-%d", i) }
	var got [n]lists
	var subs [n]*subscriber.Subscription
	for i := range n {
		if err := srv.RegisterInstance("", "", svc(i), provider("10.0.0.1", 8080)); err != nil {
			t.Fatal(err)
		}
		sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: svc(i)}, got[i].listen)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub
	}
	for i := range n {
		eventually(t, e2eTimeout, "the first lists", func() bool { return slices.Equal(got[i].last(), []string{"10.0.0.1:8080"}) })
	}
	if err := srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{FirstPerConnection: 4}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.counts()
	srv.Stop()
	eventually(t, e2eTimeout, "the subscriptions to notice the outage", func() bool {
		return subs[0].Status().State == subscriber.StateRetrying
	})
	for i := range n { // the registry comes back with the providers
		if err := srv.RegisterInstance("", "", svc(i), provider("10.0.0.1", 8080)); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "every subscription held by the server", func() bool {
		for i := range n {
			if srv.SubscriberCount("", "", svc(i)) != 1 || subs[i].Status().State != subscriber.StateSubscribed {
				return false
			}
		}
		return true
	})
	rejected := srv.Stats().Rejected[nacostest.RequestSubscribeService]
	if rejected < 4 {
		t.Fatalf("%d subscribes rejected, want at least 4", rejected)
	}
	// Only the rejected ones went through the Manager again: each Subscribe
	// call follows a rejection (of the redo, or of an earlier repair; a
	// busy machine can make the client reconnect and redo more than once).
	// (0 is possible: a second redo on the same connection, after a
	// request failure, gets past the connection's first 4.)
	if after, _ := c.counts(); int64(after-before) > rejected {
		t.Errorf("%d Subscribe calls after the restart, want at most %d (one per rejection)", after-before, rejected)
	}
	for i := range n {
		if err := srv.RegisterInstance("", "", svc(i), provider("10.0.0.2", 8080)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		eventually(t, e2eTimeout, "the change after the restart", func() bool {
			return slices.Equal(got[i].last(), []string{"10.0.0.1:8080", "10.0.0.2:8080"})
		})
		noEmptyAfterFirst(t, got[i].get())
	}
}

// 7. A lost re-registration push after a restart: the registry comes back
// empty, the SDK's redo stores the empty reply, and the push that carries
// the re-registered provider never reaches the clients (the end state of a
// lost push, and of nacos-sdk-go v2.3.2's unlocked ProcessService storing
// an older empty reply over a newer push). The SDK alone keeps the empty
// list; rebound holds the last good list, asks the server during the hold
// (hold/8 after the empty list arrived), finds the provider, ends the hold
// and resubscribes, so the SDK's cache is repaired too and later pushes
// arrive. Without that check the listener was handed the empty list at
// the hold's cap.
func TestE2ELostPushAfterRestart(t *testing.T) {
	// Checks at 4, 8 and 16 s after the empty list arrived: the two clients
	// reconnect at the SDK's own pace, so the push can be lost some seconds
	// into the hold; the check after that is at most 8 s away.
	const hold = 32 * time.Second
	srv := newServer(t)
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.1", 8080)); err != nil {
		t.Fatal(err)
	}
	consumer := newClient(t, srv)
	m, c := newManager(t, consumer, subscriber.WithEmptyListHold(hold))
	var got lists
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, got.listen)
	if err != nil {
		t.Fatal(err)
	}
	// The baseline: the same SDK, subscribed directly.
	bare := newClient(t, srv)
	var sdk lists
	if err := bare.Subscribe(&vo.SubscribeParam{ServiceName: "orders", SubscribeCallback: func(ins []model.Instance, err error) {
		if err == nil {
			var l []subscriber.Instance
			for _, i := range ins {
				l = append(l, subscriber.Instance{IP: i.Ip, Port: i.Port})
			}
			sdk.listen(l)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1:8080"}
	eventually(t, e2eTimeout, "the first lists", func() bool {
		return slices.Equal(got.last(), want) && slices.Equal(sdk.last(), want)
	})

	srv.Stop()
	eventually(t, e2eTimeout, "the clients to notice the outage", func() bool {
		return sub.Status().State == subscriber.StateRetrying && !bare.ServerHealthy()
	})
	if err := srv.Start(); err != nil { // empty: the provider is gone
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("status %+v; server: %d subscribers, instances %v, stats %+v", sub.Status(),
				srv.SubscriberCount("", "", "orders"), srv.Instances("", "", "orders"), srv.Stats())
		}
	}()
	eventually(t, e2eTimeout, "both redos, their pushes sent, and the empty list held", func() bool {
		return srv.SubscriberCount("", "", "orders") == 2 && srv.PendingPushes() == 0 &&
			sub.Status().State == subscriber.StateHeld && len(sdk.last()) == 0
	})
	if n := srv.LoseNextPush("", "", "orders"); n != 2 {
		t.Fatalf("LoseNextPush = %d, want 2", n)
	}
	attempts, _ := c.counts()
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.1", 8080)); err != nil {
		t.Fatal(err)
	}
	eventually(t, e2eTimeout, "the hold to end with the server's list", func() bool {
		st := sub.Status()
		return st.State == subscriber.StateSubscribed && st.HeldSince.IsZero() && st.Instances == 1
	})
	noEmptyAfterFirst(t, got.get())
	if after, _ := c.counts(); after-attempts != 1 {
		t.Errorf("%d Subscribe calls after the check, want 1 (the repair)", after-attempts)
	}
	if st := srv.Stats(); st.PushesLost != 2 {
		t.Errorf("PushesLost = %d, want 2", st.PushesLost)
	}
	if l := sdk.last(); len(l) != 0 {
		t.Fatalf("the SDK alone has %v; the scenario did not lose its push", l)
	}
	// The repair re-subscribed the SDK: a later change reaches rebound's
	// listener; the SDK alone gets it too (a push with a newer time).
	if err := srv.RegisterInstance("", "", "orders", provider("10.0.0.2", 8080)); err != nil {
		t.Fatal(err)
	}
	both := []string{"10.0.0.1:8080", "10.0.0.2:8080"}
	eventually(t, e2eTimeout, "the change after the repair", func() bool { return slices.Equal(got.last(), both) })
	noEmptyAfterFirst(t, got.get())
}
