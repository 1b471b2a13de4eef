package reboundgrpc_test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want subscriber.Key
	}{
		{"rebound:///orders", subscriber.Key{Service: "orders"}},
		{"rebound:orders", subscriber.Key{Service: "orders"}},
		{"rebound:///orders?group=G&clusters=b,a", subscriber.Key{Service: "orders", Group: "G", Clusters: []string{"a", "b"}}},
		{"rebound:///orders?clusters=a&clusters=b,a", subscriber.Key{Service: "orders", Clusters: []string{"a", "b"}}},
		{"rebound://prod/orders", subscriber.Key{Namespace: "prod", Service: "orders"}},
		{"rebound:///orders?namespace=prod", subscriber.Key{Namespace: "prod", Service: "orders"}},
		{"rebound:///shop/orders", subscriber.Key{Service: "shop/orders"}},
	} {
		got, err := reboundgrpc.ParseTarget(tc.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
			continue
		}
		if !sameKey(got, tc.want) {
			t.Errorf("ParseTarget(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
		// Target is the inverse.
		tgt, err := reboundgrpc.Target("rebound", got)
		if err != nil {
			t.Errorf("Target(%#v): %v", got, err)
			continue
		}
		back, err := reboundgrpc.ParseTarget(tgt)
		if err != nil || !sameKey(back, got) {
			t.Errorf("ParseTarget(Target(%#v)) = %#v, %v", got, back, err)
		}
	}
	for _, bad := range []string{
		"rebound:///", "rebound://ns/", "rebound:///orders?grup=x", "rebound:///orders?group=a&group=b",
		"rebound:///orders?clusters=a,,b", "rebound:///orders#x", "rebound://ns/orders?namespace=other",
		"rebound://u@ns/orders", "rebound:///orders?%zz",
	} {
		_, err := reboundgrpc.ParseTarget(bad)
		if !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("ParseTarget(%q): %v, want an ErrInvalidArgument", bad, err)
		}
	}
}

func TestNewBuilderErrors(t *testing.T) {
	if _, err := reboundgrpc.NewBuilder(nil); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("NewBuilder(nil): %v", err)
	}
	m, err := subscriber.New(subscribertest.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, o := range []reboundgrpc.Option{
		reboundgrpc.WithLinger(-1),
		reboundgrpc.WithResolveNowInterval(0), reboundgrpc.WithUnresolvedReport(-1),
		reboundgrpc.WithPolicy(rebound.Policy{Multiplier: 0.5}),
	} {
		if _, err := reboundgrpc.NewBuilder(m, o); !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("NewBuilder with a bad option: %v", err)
		}
	}
	b, err := reboundgrpc.NewBuilder(m, nil)
	if err != nil || b.Scheme() != "rebound" {
		t.Fatalf("NewBuilder: %v, scheme %q", err, b.Scheme())
	}
	_ = b.Close()
	_ = b.Close()
}

func TestClassify(t *testing.T) {
	md := func(v string) metadata.MD { return metadata.Pairs(reboundgrpc.PushbackTrailer, v) }
	for _, tc := range []struct {
		code      codes.Code
		trailer   metadata.MD
		retryable bool
		after     time.Duration
	}{
		{codes.Unavailable, nil, true, 0},
		{codes.DeadlineExceeded, nil, true, 0},
		{codes.Aborted, nil, true, 0},
		{codes.ResourceExhausted, md("250"), true, 250 * time.Millisecond},
		{codes.ResourceExhausted, md("-1"), false, 0},
		{codes.ResourceExhausted, md("soon"), false, 0},
		{codes.ResourceExhausted, nil, false, 0},
		{codes.InvalidArgument, nil, false, 0},
		{codes.NotFound, nil, false, 0},
		{codes.PermissionDenied, nil, false, 0},
		{codes.Unauthenticated, nil, false, 0},
		{codes.Unimplemented, nil, false, 0},
		{codes.FailedPrecondition, nil, false, 0},
		{codes.Internal, nil, false, 0},
		{codes.Unknown, nil, false, 0},
		{codes.Canceled, nil, false, 0},
	} {
		orig := status.Error(tc.code, "x")
		err := reboundgrpc.Classify(orig, tc.trailer)
		if got := failback.DefaultRetryable(err); got != tc.retryable {
			t.Errorf("%v %v: failback.DefaultRetryable = %v, want %v", tc.code, tc.trailer, got, tc.retryable)
		}
		if got := reboundgrpc.Retryable(orig); tc.trailer == nil && got != tc.retryable {
			t.Errorf("%v: Retryable = %v, want %v", tc.code, got, tc.retryable)
		}
		d, ok := rebound.RetryAfterDelay(err)
		if ok != (tc.after > 0) || d != tc.after {
			t.Errorf("%v %v: RetryAfterDelay = %v, %v, want %v", tc.code, tc.trailer, d, ok, tc.after)
		}
		if status.Code(err) != tc.code {
			t.Errorf("%v: status.Code of the classified error is %v", tc.code, status.Code(err))
		}
	}
	if reboundgrpc.Classify(nil, nil) != nil {
		t.Fatal("Classify(nil) != nil")
	}
}

// memEnv is a Manager over the in-memory registry with a Builder, inside a
// synctest bubble.
func memEnv(t *testing.T, opts ...reboundgrpc.Option) (*subscribertest.Registry, *reboundgrpc.Builder) {
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
	return reg, b
}

var orders = subscriber.Key{Service: "orders"}

func inst(port uint64, mod ...func(*subscriber.Instance)) subscriber.Instance {
	in := subscriber.Instance{ID: itoa(int(port)), IP: "10.0.0.1", Port: port, Weight: 1, Healthy: true, Enabled: true, Cluster: "a", Metadata: map[string]string{"zone": "z1"}}
	for _, f := range mod {
		f(&in)
	}
	return in
}

// TestRejectedStateRetried: a state the ClientConn rejects is sent again
// with backoff until accepted; it is never dropped.
func TestRejectedStateRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var retried, recovered atomic.Int32
		reg, b := memEnv(t, reboundgrpc.WithPolicy(rebound.Policy{Initial: time.Second, Max: 4 * time.Second},
			rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
				switch e.Kind {
				case rebound.EventRetry:
					retried.Add(1)
				case rebound.EventRecovered:
					recovered.Add(1)
				}
			}))))
		reg.Set(orders, inst(1), inst(2))
		f := newFakeCC()
		f.reject = 3
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		time.Sleep(time.Minute)
		synctest.Wait()
		states, _ := f.snapshot()
		if !slices.Equal(states, []int{2, 2, 2, 2}) {
			t.Fatalf("states sent %v, want 3 rejected and 1 accepted, each with 2 endpoints", states)
		}
		if st := b.Stats(); st.Rejected != 3 {
			t.Fatalf("stats %+v, want 3 rejected", st)
		}
		if retried.Load() != 3 || recovered.Load() != 1 {
			t.Fatalf("hooks: %d Retried, %d Recovered; want 3 and 1", retried.Load(), recovered.Load())
		}
	})
}

// TestRejectedThenNewer: a newer list replaces the one being retried at
// once.
func TestRejectedThenNewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t, reboundgrpc.WithPolicy(rebound.Policy{Initial: time.Hour, Max: time.Hour}))
		reg.Set(orders, inst(1))
		f := newFakeCC()
		f.reject = 1
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		reg.Set(orders, inst(1), inst(2), inst(3))
		synctest.Wait()
		states, _ := f.snapshot()
		if !slices.Equal(states, []int{1, 3}) {
			t.Fatalf("states %v, want [1 3]", states)
		}
	})
}

// TestSharedAndLinger: resolvers of one key share a subscription; a
// resolver built during the linger gets the last list at once, without a
// registry request; after the linger the registry is unsubscribed.
func TestSharedAndLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t, reboundgrpc.WithLinger(10*time.Second))
		reg.Set(orders, inst(1), inst(2))
		tgt := mustTarget(t, "rebound:///orders")
		f1, f2 := newFakeCC(), newFakeCC()
		r1, _ := b.Build(tgt, f1, resolver.BuildOptions{})
		r2, _ := b.Build(tgt, f2, resolver.BuildOptions{})
		synctest.Wait()
		if s := reg.Stats(); s.Subscribes != 1 || s.Active != 1 {
			t.Fatalf("registry %+v, want one subscription", s)
		}
		r1.Close()
		r2.Close()
		time.Sleep(5 * time.Second)
		f3 := newFakeCC()
		r3, _ := b.Build(tgt, f3, resolver.BuildOptions{})
		synctest.Wait()
		if states, _ := f3.snapshot(); !slices.Equal(states, []int{2}) {
			t.Fatalf("rebuilt resolver got %v, want the last list at once", states)
		}
		r3.Close()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 || s.Subscribes != 1 {
			t.Fatalf("registry %+v before the linger ends", s)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 || s.Unsubscribes != 1 {
			t.Fatalf("registry %+v after the linger, want unsubscribed", s)
		}
		if st := b.Stats(); st.Subscriptions != 0 || st.Subscribes != 1 || st.Unsubscribes != 1 {
			t.Fatalf("builder %+v", st)
		}
	})
}

// TestUnresolvedReport: with the registry down at Build, the ClientConn
// hears the error (so fail-fast RPCs fail) and then the list when the
// registry is back.
func TestUnresolvedReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		reg.Set(orders, inst(1))
		reg.SetDown(true)
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatalf("Build with the registry down: %v", err)
		}
		defer r.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		states, errs := f.snapshot()
		if len(states) != 0 || len(errs) == 0 || !errors.Is(errs[0], reboundgrpc.ErrUnresolved) {
			t.Fatalf("registry down: states %v errors %v, want an ErrUnresolved report", states, errs)
		}
		reg.SetDown(false)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if states, _ := f.snapshot(); !slices.Equal(states, []int{1}) {
			t.Fatalf("registry back: states %v, want [1]", states)
		}
	})
}

// TestEmptyAndFiltered: an empty list is sent as an empty state plus a
// ReportError naming the cause; unhealthy and disabled instances are
// filtered; attributes carry the instance and its weight.
func TestEmptyAndFiltered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		sick := func(in *subscriber.Instance) { in.Healthy = false }
		off := func(in *subscriber.Instance) { in.Enabled = false }
		reg.Set(orders, inst(1, sick), inst(2, off))
		f := newFakeCC()
		r, _ := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		defer r.Close()
		synctest.Wait()
		states, errs := f.snapshot()
		if !slices.Equal(states, []int{0}) || len(errs) != 1 || !errors.Is(errs[0], reboundgrpc.ErrNoInstances) {
			t.Fatalf("all filtered: states %v errors %v", states, errs)
		}
		t.Logf("all filtered: %v", errs[0])
	})
}

func TestEndpointAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		reg.Set(orders, inst(1, func(in *subscriber.Instance) { in.Weight = 0.5 }), inst(2))
		cc := &stateCC{fakeCC: newFakeCC()}
		r, _ := b.Build(mustTarget(t, "rebound:///orders"), cc, resolver.BuildOptions{})
		defer r.Close()
		synctest.Wait()
		st := cc.last
		if len(st.Endpoints) != 2 || len(st.Addresses) != 2 {
			t.Fatalf("state %+v", st)
		}
		ep := st.Endpoints[0]
		in, ok := reboundgrpc.InstanceFromEndpoint(ep)
		if !ok || in.Port != 1 || in.Cluster != "a" || in.Metadata["zone"] != "z1" {
			t.Fatalf("InstanceFromEndpoint = %+v, %v", in, ok)
		}
		if w := weight.FromEndpoint(ep).Weight; w != 50 {
			t.Fatalf("weight %d, want 50", w)
		}
		if w := weight.FromEndpoint(st.Endpoints[1]).Weight; w != 100 {
			t.Fatalf("weight %d, want 100", w)
		}
		if ep.Addresses[0].Addr != "10.0.0.1:1" || st.Addresses[0].Addr != "10.0.0.1:1" {
			t.Fatalf("address %s / %s", ep.Addresses[0].Addr, st.Addresses[0].Addr)
		}
	})
}

type stateCC struct {
	*fakeCC
	last resolver.State
}

func (c *stateCC) UpdateState(s resolver.State) error {
	c.fakeCC.mu.Lock()
	c.last = s
	c.fakeCC.mu.Unlock()
	return c.fakeCC.UpdateState(s)
}

// TestStoppedSubscription: when the Manager closes, ClientConns hear it.
func TestStoppedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		defer reg.Close()
		m, _ := subscriber.New(reg)
		b, _ := reboundgrpc.NewBuilder(m)
		defer b.Close()
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, _ := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		defer r.Close()
		synctest.Wait()
		_ = m.Close()
		synctest.Wait()
		_, errs := f.snapshot()
		if len(errs) != 1 || !errors.Is(errs[0], rebound.ErrClosed) {
			t.Fatalf("errors %v, want the Manager's closing reported", errs)
		}
		if _, err := b.Build(mustTarget(t, "rebound:///orders"), newFakeCC(), resolver.BuildOptions{}); !errors.Is(err, rebound.ErrClosed) {
			t.Fatalf("Build after the Manager closed: %v", err)
		}
	})
}

// TestResolveNowTrailingReachesRegistry: at the defaults, a ResolveNow
// coalesced into the end of an interval still reaches the registry (the
// Manager's own refresh pacing does not drop it).
func TestResolveNowTrailingReachesRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, _ := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		defer r.Close()
		synctest.Wait()
		reads := func() int { s := reg.Stats(); return s.Subscribes + s.Lookups }
		before := reads()
		r.ResolveNow(resolver.ResolveNowOptions{})
		synctest.Wait()
		lead := reads()
		time.Sleep(3 * time.Second)
		for range 100 {
			r.ResolveNow(resolver.ResolveNowOptions{})
		}
		synctest.Wait()
		if reads() != lead {
			t.Fatalf("coalesced calls reached the registry at once: %d -> %d", lead, reads())
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		t.Logf("registry reads: before %d, after the first ResolveNow %d, after the interval %d", before, lead, reads())
		if lead <= before || reads() <= lead {
			t.Fatalf("registry reads %d -> %d -> %d, want one more at the first ResolveNow and one at the end of the interval", before, lead, reads())
		}
		if st := b.Stats(); st.Refreshes != 2 || st.ResolveNows != 101 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// The target syntax and the subscriber.Key it names (was ExampleParseTarget).
func TestParseTargetSyntax(t *testing.T) {
	key, err := reboundgrpc.ParseTarget("rebound://prod/orders?group=shop&clusters=b,a")
	if got := fmt.Sprint(key.Namespace, " ", key.Group, " ", key.Service, " ", key.Clusters, " ", err); got != "prod shop orders [a b] <nil>" {
		t.Errorf("ParseTarget = %s", got)
	}
	_, err = reboundgrpc.ParseTarget("rebound:///orders?grup=shop")
	const want = `reboundgrpc.Builder.Build: target "rebound:///orders?grup=shop" has an unknown parameter grup (known: group, clusters, namespace)`
	if err == nil || err.Error() != want {
		t.Errorf("ParseTarget error = %v, want %s", err, want)
	}
}
