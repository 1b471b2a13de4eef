package reboundgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound/reboundgrpc"
)

// TestNacosRoundRobin: two providers registered in Nacos both receive RPCs
// through a real ClientConn on the rebound resolver.
func TestNacosRoundRobin(t *testing.T) {
	env := newNacosEnv(t)
	a, b := startBackend(t), startBackend(t)
	env.register(t, a, b)
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, a, b)
	if st := env.b.Stats(); st.Subscriptions != 1 || st.Subscribes != 1 || st.Resolvers != 1 {
		t.Fatalf("stats %+v, want one subscription and one resolver", st)
	}
}

// TestNacosProviderChurn: a provider goes away and a new one appears on a
// new port; RPCs move to it.
func TestNacosProviderChurn(t *testing.T) {
	env := newNacosEnv(t)
	a, b := startBackend(t), startBackend(t)
	env.register(t, a, b)
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, a, b)

	a.stop()
	env.deregister(a)
	c := startBackend(t)
	env.register(t, c)
	waitBackends(t, cc, b, c)
	// Once c is seen, a is gone from the list: every RPC succeeds.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 50 {
		addr, err := check(ctx, cc)
		if err != nil {
			t.Fatalf("RPC %d after churn: %v", i, err)
		}
		if addr == a.addr {
			t.Fatalf("RPC %d reached the removed provider %s", i, a.addr)
		}
	}
}

// TestNacosEmptyList: a confirmed empty list reaches the ClientConn in a
// form it accepts: fail-fast RPCs fail at once with Unavailable (with
// pick_first the message names the service and says "no instances"; with
// round_robin grpc-go says "no children to pick from"), and the next
// provider is used as soon as it registers.
func TestNacosEmptyList(t *testing.T) {
	for _, lb := range []string{"pick_first", "round_robin"} {
		t.Run(lb, func(t *testing.T) {
			env := newNacosEnv(t)
			a := startBackend(t)
			env.register(t, a)
			cc := dial(t, env.b, "rebound:///orders", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+lb+`":{}}]}`))
			waitBackends(t, cc, a)

			env.deregister(a)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var err error
			for ctx.Err() == nil {
				if _, err = check(ctx, cc); err != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("RPC on an empty list: %v", err)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("RPC on an empty list: %v, want Unavailable", err)
			}
			if lb == "pick_first" && (!strings.Contains(err.Error(), "no instances") || !strings.Contains(err.Error(), "orders")) {
				t.Fatalf("RPC on an empty list: %v, want the service and \"no instances\" named", err)
			}
			b := startBackend(t)
			env.register(t, b)
			waitBackends(t, cc, b)
		})
	}
}

// TestNacosFilter: unhealthy and disabled instances never reach the
// ClientConn; WithFilter(nil) admits them.
func TestNacosFilter(t *testing.T) {
	env := newNacosEnv(t, reboundgrpc.WithUnresolvedReport(0))
	a, sick := startBackend(t), startBackend(t)
	env.register(t, a)
	in := sick.nacos()
	in.Healthy = false
	if err := env.srv.RegisterInstance("", "", env.service, in); err != nil {
		t.Fatal(err)
	}
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, a)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 30 {
		addr, err := check(ctx, cc)
		if err != nil || addr == sick.addr {
			t.Fatalf("RPC %d: addr %s err %v; the unhealthy instance %s must be filtered", i, addr, err, sick.addr)
		}
	}
}

// TestManyClientConnsOneSubscription: 1,000 ClientConns to one target share
// one registry subscription.
func TestManyClientConnsOneSubscription(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	env := newNacosEnv(t)
	a := startBackend(t)
	env.register(t, a)
	env.srv.ResetStats()
	ccs := make([]*grpc.ClientConn, n)
	for i := range ccs {
		ccs[i] = dial(t, env.b, "rebound:///orders", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pick_first":{}}]}`))
		ccs[i].Connect() // leave idle mode: builds the resolver
	}
	eventually(t, "every resolver built", func() bool { return env.b.Stats().Resolvers == n })
	for i, cc := range ccs {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		if _, err := check(ctx, cc, grpc.WaitForReady(true)); err != nil {
			cancel()
			t.Fatalf("ClientConn %d: %v", i, err)
		}
		cancel()
	}
	st := env.b.Stats()
	subReqs := env.srv.Stats().Requests["SubscribeServiceRequest"]
	t.Logf("%d ClientConns: builder %+v; nacos SubscribeServiceRequest %d, subscribers %d",
		n, st, subReqs, env.srv.SubscriberCount("", "", env.service))
	if st.Subscriptions != 1 || st.Subscribes != 1 {
		t.Fatalf("%d ClientConns: %d subscriptions (%d Subscribe calls), want 1", n, st.Subscriptions, st.Subscribes)
	}
	if got := env.srv.SubscriberCount("", "", env.service); got != 1 {
		t.Fatalf("registry holds %d subscriptions, want 1", got)
	}
	for _, cc := range ccs {
		_ = cc.Close()
	}
	eventually(t, "resolvers closed", func() bool { return env.b.Stats().Resolvers == 0 })
}

// TestIdleCycles: a ClientConn entering and leaving idle mode (its resolver
// closed and built again each time) keeps one subscription; the rebuilt
// resolver gets the list at once; after the linger the subscription ends.
func TestIdleCycles(t *testing.T) {
	env := newNacosEnv(t, reboundgrpc.WithLinger(2*time.Second))
	a := startBackend(t)
	env.register(t, a)
	cc := dial(t, env.b, "rebound:///orders", grpc.WithIdleTimeout(50*time.Millisecond))
	cycles := 20
	for i := range cycles {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		_, err := check(ctx, cc, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		eventually(t, "idle", func() bool { return env.b.Stats().Resolvers == 0 })
	}
	st := env.b.Stats()
	t.Logf("after %d idle cycles: %+v", cycles, st)
	if st.Builds < uint64(cycles) {
		t.Fatalf("%d builds for %d idle cycles: idle mode not exercised", st.Builds, cycles)
	}
	if st.Subscribes != 1 {
		t.Fatalf("%d idle cycles made %d subscriptions, want 1", cycles, st.Subscribes)
	}
	// Idle now: after the linger the subscription is released, at the
	// registry too.
	eventually(t, "linger expired", func() bool { return env.b.Stats().Subscriptions == 0 })
	eventually(t, "registry unsubscribed", func() bool { return env.srv.SubscriberCount("", "", env.service) == 0 })
	// The next RPC subscribes again.
	waitBackends(t, cc, a)
	if st := env.b.Stats(); st.Subscribes != 2 {
		t.Fatalf("after the linger: %d subscribes, want 2", st.Subscribes)
	}
}

// TestResolveNowStorm: 1,000 ResolveNow calls from ClientConns sharing a
// subscription lead to a bounded number of re-confirmations and registry
// requests.
func TestResolveNowStorm(t *testing.T) {
	env := newNacosEnv(t, reboundgrpc.WithResolveNowInterval(time.Second))
	a := startBackend(t)
	env.register(t, a)
	const conns = 10
	var rs []resolver.Resolver
	var ccs []*fakeCC
	for range conns {
		f := newFakeCC()
		r, err := env.b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, ccs = append(rs, r), append(ccs, f)
	}
	defer func() {
		for _, r := range rs {
			r.Close()
		}
	}()
	for _, f := range ccs {
		eventually(t, "first state", func() bool { s, _ := f.snapshot(); return len(s) > 0 })
	}
	env.srv.ResetStats()
	// 1,000 calls spread over about 2 s (a balancer calls ResolveNow on
	// every failed connection), then wait past the trailing re-confirmation.
	start := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	for i := range 1000 {
		rs[i%conns].ResolveNow(resolver.ResolveNowOptions{})
		if i%2 == 0 {
			<-tick.C
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	eventually(t, "trailing re-confirmation", func() bool { return time.Since(start) > elapsed+1500*time.Millisecond })
	st := env.b.Stats()
	reqs := env.srv.Stats().Requests
	t.Logf("1,000 ResolveNow over %v: %d re-confirmations asked of the Manager; registry requests %v", elapsed, st.Refreshes, reqs)
	// At most one at once and one at the end of each interval.
	if max := 2 + uint64(elapsed/time.Second); st.Refreshes > max {
		t.Fatalf("%d re-confirmations for 1,000 ResolveNow calls in %v, want at most %d", st.Refreshes, elapsed, max)
	}
	if st.Refreshes == 0 {
		t.Fatal("no re-confirmation asked for")
	}
	// Each re-confirmation is at most one registry read (Refresh uses the
	// adapter's Lookup, a ServiceQueryRequest, or a Subscribe: an SDK
	// unsubscribe and subscribe).
	if n := reqs["SubscribeServiceRequest"] + reqs["ServiceQueryRequest"]; n > int64(2*st.Refreshes) {
		t.Fatalf("%d registry reads for %d re-confirmations", n, st.Refreshes)
	}
	if st.ResolveNows != 1000 {
		t.Fatalf("ResolveNows = %d", st.ResolveNows)
	}
}

// TestInvalidTargets: Build rejects a bad target with a clear error, and
// an RPC on it fails with that error.
func TestInvalidTargets(t *testing.T) {
	env := newNacosEnv(t)
	for _, target := range []string{"rebound:///", "rebound:///orders?grup=x", "rebound:///orders?clusters=a,,b", "rebound:///orders#frag"} {
		_, err := env.b.Build(mustTarget(t, target), newFakeCC(), resolver.BuildOptions{})
		if err == nil {
			t.Errorf("Build(%q): nil error", target)
			continue
		}
		t.Logf("Build(%q): %v", target, err)
	}
	cc := dial(t, env.b, "rebound:///orders?grup=x")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := check(ctx, cc)
	if err == nil || !strings.Contains(err.Error(), "unknown parameter grup") {
		t.Fatalf("RPC on a bad target: %v", err)
	}
}

// TestBuilderClosed: Build after Close fails with ErrClosed.
func TestBuilderClosed(t *testing.T) {
	env := newNacosEnv(t)
	_ = env.b.Close()
	_, err := env.b.Build(mustTarget(t, "rebound:///orders"), newFakeCC(), resolver.BuildOptions{})
	if !errors.Is(err, reboundgrpc.ErrClosed) {
		t.Fatalf("Build after Close: %v", err)
	}
}

var _ = fmt.Sprint
