package reboundgrpc_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// realEnv is the in-memory registry, a Manager and a Builder for real
// ClientConns (no synctest: grpc-go's transports use real sockets).
func realEnv(t *testing.T, opts ...reboundgrpc.Option) (*subscribertest.Registry, *subscriber.Manager, *reboundgrpc.Builder) {
	t.Helper()
	reg := subscribertest.New()
	m, err := subscriber.New(reg, subscriber.WithPolicy(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	b, err := reboundgrpc.NewBuilder(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		_ = m.Close()
		reg.Close()
	})
	return reg, m, b
}

// TestClientConnsCloseWhileViewFires: real ClientConns closed (and built
// again) while their shared view fires list after list: no race, no
// deadlock, and when the last one is closed (linger 0) the registry holds
// nothing and the Builder counts no resolver.
func TestClientConnsCloseWhileViewFires(t *testing.T) {
	reg, _, b := realEnv(t, reboundgrpc.WithLinger(0))
	be := [2]*backend{startBackend(t), startBackend(t)}
	reg.Set(orders, be[0].instance())
	stop := make(chan struct{})
	var pushes sync.WaitGroup
	pushes.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			reg.Set(orders, be[i%2].instance(), be[(i+1)%2].instance())
			reg.Set(orders, be[i%2].instance())
			time.Sleep(200 * time.Microsecond)
		}
	})
	var ccs sync.WaitGroup
	for range 8 {
		ccs.Go(func() {
			for range 10 {
				cc, err := grpc.NewClient("rebound:///orders", grpc.WithResolvers(b),
					grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(roundRobin))
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				if _, err := check(ctx, cc, grpc.WaitForReady(true)); err != nil {
					t.Errorf("RPC through a ClientConn under churn: %v", err)
				}
				cancel()
				_ = cc.Close()
			}
		})
	}
	ccs.Wait()
	close(stop)
	pushes.Wait()
	eventually(t, "resolvers closed and the key released", func() bool {
		st := b.Stats()
		return st.Resolvers == 0 && st.Subscriptions == 0 && reg.Stats().Active == 0
	})
	if st := b.Stats(); st.Subscribes != st.Unsubscribes {
		t.Fatalf("builder %+v: subscribes and unsubscribes differ", st)
	}
}

// TestBuilderCloseWithClientConnsOpen: closing the Builder while
// ClientConns are open and lists keep coming stops the resolvers'
// goroutines and releases the key (the registry holds nothing); the
// ClientConns keep their last addresses, and closing them afterwards is
// safe.
func TestBuilderCloseWithClientConnsOpen(t *testing.T) {
	reg, _, b := realEnv(t)
	a := startBackend(t)
	reg.Set(orders, a.instance())
	var conns []*grpc.ClientConn
	for range 4 {
		cc, err := grpc.NewClient("rebound:///orders", grpc.WithResolvers(b),
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(roundRobin))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cc)
		waitBackends(t, cc, a)
	}
	stop := make(chan struct{})
	var pushes sync.WaitGroup
	pushes.Go(func() {
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			reg.Set(orders, a.instance(), subscriber.Instance{ID: "x", IP: "127.0.0.1", Port: 1 + i%100, Weight: 1, Healthy: false, Enabled: true})
			time.Sleep(100 * time.Microsecond)
		}
	})
	_ = b.Close()
	if s := reg.Stats(); s.Active != 0 {
		close(stop)
		pushes.Wait()
		t.Fatalf("registry %+v after the Builder's Close, want nothing subscribed", s)
	}
	close(stop)
	pushes.Wait()
	for _, cc := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		if _, err := check(ctx, cc, grpc.WaitForReady(true)); err != nil {
			t.Errorf("RPC after the Builder's Close: %v (the ClientConn keeps its last addresses)", err)
		}
		cancel()
		_ = cc.Close()
	}
	if st := b.Stats(); st.Resolvers != 0 {
		t.Fatalf("builder %+v after every ClientConn closed", st)
	}
}

// TestBuilderCloseFromFilter: a WithFilter function that closes the
// Builder (it runs on a resolver's goroutine) does not deadlock: Close
// returns and the resolver's goroutine ends after the filter. Close
// waited for that goroutine, which waited for Close.
func TestBuilderCloseFromFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b *reboundgrpc.Builder
		var closed atomic.Bool
		keep := func(in subscriber.Instance) bool {
			if in.Port == 666 {
				_ = b.Close()
				closed.Store(true)
			}
			return true
		}
		var reg *subscribertest.Registry
		reg, _, b = memEnvWith(t, nil, reboundgrpc.WithFilter(keep))
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		reg.Set(orders, inst(1), inst(666))
		synctest.Wait()
		if !closed.Load() {
			t.Fatal("Builder.Close called from the filter did not return")
		}
		r.Close()
		if st := b.Stats(); st.Resolvers != 0 || st.Subscriptions != 0 {
			t.Fatalf("builder %+v after Close", st)
		}
	})
}
