package reboundgrpc_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// sameKey compares two Keys by value (Clusters as sets), never by their
// printed form.
func sameKey(a, b subscriber.Key) bool {
	ca, cb := slices.Clone(a.Clusters), slices.Clone(b.Clusters)
	slices.Sort(ca)
	slices.Sort(cb)
	return a.Namespace == b.Namespace && a.Group == b.Group && a.Service == b.Service &&
		slices.Equal(slices.Compact(ca), slices.Compact(cb))
}

// memEnvWith is memEnv with Manager options.
func memEnvWith(t *testing.T, mopts []subscriber.Option, opts ...reboundgrpc.Option) (*subscribertest.Registry, *subscriber.Manager, *reboundgrpc.Builder) {
	t.Helper()
	reg := subscribertest.New()
	m, err := subscriber.New(reg, append([]subscriber.Option{subscriber.WithPolicy(testPolicy)}, mopts...)...)
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

// TestFilterPanicRecovered: a WithFilter function that panics on a list
// does not kill the process: the panic is counted, the ClientConn keeps
// the last good list, and later lists are delivered. A panic on the first
// list reaches the ClientConn through ReportError.
func TestFilterPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keep := func(in subscriber.Instance) bool {
			if in.Port == 666 {
				panic("filter bug")
			}
			return true
		}
		reg, _, b := memEnvWith(t, nil, reboundgrpc.WithFilter(keep))
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		reg.Set(orders, inst(1), inst(666)) // the filter panics
		synctest.Wait()
		if st := b.Stats(); st.Panics != 1 {
			t.Fatalf("stats %+v, want 1 panic", st)
		}
		states, errs := f.snapshot()
		if !slices.Equal(states, []int{1, 1}) || len(errs) != 0 {
			t.Fatalf("after the panic: states %v, errors %v; want the last good list (1 endpoint) again, no error", states, errs)
		}
		reg.Set(orders, inst(1), inst(2)) // a later list is delivered
		synctest.Wait()
		if states, _ = f.snapshot(); !slices.Equal(states, []int{1, 1, 2}) {
			t.Fatalf("states %v, want the later list (2 endpoints) delivered", states)
		}

		// A panic on the first list of a key: the ClientConn hears it.
		bad := subscriber.Key{Service: "bad"}
		reg.Set(bad, inst(666))
		f2 := newFakeCC()
		r2, err := b.Build(mustTarget(t, "rebound:///bad"), f2, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		synctest.Wait()
		states, errs = f2.snapshot()
		var pe *cluster.PanicError
		if len(states) != 0 || len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Value != "filter bug" {
			t.Fatalf("first list panicked: states %v, errors %v; want no state and the panic reported", states, errs)
		}
		reg.Set(bad, inst(3))
		synctest.Wait()
		if states, _ = f2.snapshot(); !slices.Equal(states, []int{1}) {
			t.Fatalf("states %v after a good list, want [1]", states)
		}
		if st := b.Stats(); st.Panics != 2 {
			t.Fatalf("stats %+v, want 2 panics", st)
		}
	})
}

// TestHookPanicRecovered: a WithPolicy observer that panics (on the resolver's
// goroutine, while a rejected state is sent again) does not kill the
// process, and the state is still sent again and accepted.
func TestHookPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, _, b := memEnvWith(t, nil, reboundgrpc.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second},
			rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
				switch e.Kind {
				case rebound.EventRetry:
					panic("hook bug")
				case rebound.EventRecovered:
					panic(errors.New("hook bug 2"))
				}
			}))))
		reg.Set(orders, inst(1), inst(2))
		f := newFakeCC()
		f.reject = 2
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		time.Sleep(time.Minute)
		synctest.Wait()
		states, _ := f.snapshot()
		if !slices.Equal(states, []int{2, 2, 2}) {
			t.Fatalf("states %v, want 2 rejected and 1 accepted", states)
		}
		if st := b.Stats(); st.Panics != 3 || st.Rejected != 2 {
			t.Fatalf("stats %+v, want 3 panics (2 Retried, 1 Recovered) and 2 rejections", st)
		}
	})
}

// TestSlowFilterStallsOnlyItsKey: the filter runs outside the Builder's
// lock: while it blocks on one key's list, another key's ClientConn gets
// its state, and Stats answers (a filter calling Stats does not deadlock).
func TestSlowFilterStallsOnlyItsKey(t *testing.T) {
	release := make(chan struct{})
	var b *reboundgrpc.Builder
	keep := func(in subscriber.Instance) bool {
		if in.IP == "10.0.0.9" {
			<-release
		}
		_ = b.Stats() // deadlocked when the filter ran under the Builder's lock
		return true
	}
	var reg *subscribertest.Registry
	reg, _, b = memEnvWith(t, nil, reboundgrpc.WithFilter(keep))
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	slow := subscriber.Key{Service: "slow"}
	reg.Set(slow, inst(1, func(in *subscriber.Instance) { in.IP = "10.0.0.9" }))
	reg.Set(orders, inst(2))
	fs := newFakeCC()
	rs, err := b.Build(mustTarget(t, "rebound:///slow"), fs, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	eventually(t, "the slow key's subscription is in use", func() bool { return reg.Subscribed(slow) > 0 })

	f := newFakeCC()
	built := make(chan resolver.Resolver, 1)
	go func() {
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Error(err)
			r = nil
		}
		built <- r
	}()
	select {
	case <-f.updates:
	case <-time.After(testTimeout):
		t.Fatal("the other key got no state while the slow key's filter blocked")
	}
	if r := <-built; r != nil {
		defer r.Close()
	}
	if states, _ := f.snapshot(); !slices.Equal(states, []int{1}) {
		t.Fatalf("states %v, want [1]", states)
	}
	if st := b.Stats(); st.Subscriptions != 2 {
		t.Fatalf("stats %+v while the filter blocks, want 2 subscriptions", st)
	}
	close(release)
	released = true
	select {
	case <-fs.updates:
	case <-time.After(testTimeout):
		t.Fatal("the slow key got no state after the filter returned")
	}
}

// TestResolveNowWhileHeld: ResolveNow on a held subscription (an empty
// list held back after a registry restart) asks the server at once, which
// finds the re-registered providers and ends the hold, long before the
// Manager's own first check (hold/8).
func TestResolveNowWhileHeld(t *testing.T) {
	const hold = 80 * time.Second
	synctest.Test(t, func(t *testing.T) {
		reg, m, b := memEnvWith(t, []subscriber.Option{subscriber.WithEmptyListHold(hold)})
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		time.Sleep(10 * time.Second) // past the Manager's refresh interval
		reg.Restart()
		reg.Set(orders) // the restarted registry lost the providers
		synctest.Wait()
		st := m.Status()
		if len(st) != 1 || st[0].State != subscriber.StateHeld {
			t.Fatalf("status %+v, want held", st)
		}
		if n := reg.LoseNextPush(orders); n != 1 {
			t.Fatalf("LoseNextPush = %d", n)
		}
		reg.Set(orders, inst(1)) // re-registered; the push is lost
		before := reg.Stats()
		r.ResolveNow(resolver.ResolveNowOptions{})
		time.Sleep(time.Second) // well before hold/8 (10 s)
		synctest.Wait()
		after := reg.Stats()
		st = m.Status()
		if after.Lookups-before.Lookups != 1 || st[0].State != subscriber.StateSubscribed || st[0].Instances != 1 {
			t.Fatalf("after ResolveNow: %d lookups, status %+v; want 1 lookup and subscribed with 1 instance", after.Lookups-before.Lookups, st[0])
		}
		if bs := b.Stats(); bs.Refreshes != 1 {
			t.Fatalf("builder stats %+v, want 1 refresh", bs)
		}
		if states, _ := f.snapshot(); slices.Contains(states, 0) {
			t.Fatalf("states %v: an empty state reached the ClientConn", states)
		}
	})
}

// TestSubscriptionsByKeyValue: two keys whose names join alike (service "s[a]",
// and service "s" restricted to cluster "a") get their own subscriptions
// over a real etcd registry: each ClientConn sees only its own providers.
func TestSubscriptionsByKeyValue(t *testing.T) {
	env := newEtcdEnv(t)
	k1 := subscriber.Key{Service: "s[a]"}
	k2 := subscriber.Key{Service: "s", Clusters: []string{"a"}}
	if k1.String() == k2.String() {
		t.Fatalf("different keys print alike (%s, %s)", k1, k2)
	}
	b1, b2 := startBackend(t), startBackend(t)
	for _, p := range []struct {
		k subscriber.Key
		b *backend
	}{{k1, b1}, {k2, b2}} {
		in := p.b.instance()
		in.Cluster = "a"
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		r, err := etcd.Register(ctx, env.client, subscriber.Key{Service: p.k.Service}, in, etcd.WithTTL(5*time.Second))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	}
	t1, err := reboundgrpc.Target("rebound", k1)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := reboundgrpc.Target("rebound", k2)
	if err != nil {
		t.Fatal(err)
	}
	cc1, cc2 := dial(t, env.b, t1), dial(t, env.b, t2)
	waitBackends(t, cc1, b1)
	waitBackends(t, cc2, b2)
	if st := env.b.Stats(); st.Subscriptions != 2 {
		t.Fatalf("stats %+v, want 2 subscriptions", st)
	}
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		a1, err1 := check(ctx, cc1)
		a2, err2 := check(ctx, cc2)
		cancel()
		if err1 != nil || err2 != nil || a1 != b1.addr || a2 != b2.addr {
			t.Fatalf("%s reached %s (%v), %s reached %s (%v); want %s and %s", t1, a1, err1, t2, a2, err2, b1.addr, b2.addr)
		}
	}
}

// TestTargetRoundTrip: Target is ParseTarget's inverse for every Key it
// accepts (namespaces, groups, services and clusters with spaces, '/',
// '@', '%', '?', '#', '&', '=', non-ASCII, ...), and what it refuses is a
// Key ParseTarget cannot return.
func TestTargetRoundTrip(t *testing.T) {
	seeds := []subscriber.Key{
		{Namespace: "a b", Service: "orders"},
		{Namespace: "a/b", Service: "orders"},
		{Namespace: "u@h", Service: "orders"},
		{Namespace: "h:80", Service: "orders"},
		{Namespace: "prod", Group: "g&h=1", Service: "/lead/slash?x#y%z", Clusters: []string{"b", "a b", "ü"}},
		{Service: " "},
	}
	for _, k := range seeds {
		checkRoundTrip(t, k)
	}
	alphabet := []string{"a", "Z", "0", " ", "/", "@", ":", "%", "?", "#", "&", "=", "+", ",", ".", "~", "[", "]", "ü", "\t", "\x00", ";"}
	word := func(rng *rand.Rand) string {
		var sb strings.Builder
		for range rng.IntN(5) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		k := subscriber.Key{Namespace: word(rng), Group: word(rng), Service: word(rng)}
		for range rng.IntN(3) {
			k.Clusters = append(k.Clusters, word(rng))
		}
		checkRoundTrip(t, k)
	}
}

func FuzzTargetRoundTrip(f *testing.F) {
	f.Add("a b", "g", "orders", "c1")
	f.Add("a/b", "", "x/y", "")
	f.Add("u@h", "g=1&x", "%zz", "a b")
	f.Fuzz(func(t *testing.T, ns, group, svc, c string) {
		k := subscriber.Key{Namespace: ns, Group: group, Service: svc}
		if c != "" {
			k.Clusters = strings.Split(c, ";")
		}
		checkRoundTrip(t, k)
	})
}

func checkRoundTrip(t *testing.T, k subscriber.Key) {
	t.Helper()
	tgt, err := reboundgrpc.Target("rebound", k)
	if err != nil {
		if !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Fatalf("Target(%#v): %v, want an ErrInvalidArgument", k, err)
		}
		representable := k.Service != ""
		for _, c := range k.Clusters {
			representable = representable && c != "" && !strings.Contains(c, ",") && strings.TrimSpace(c) == c
		}
		if representable {
			t.Fatalf("Target(%#v) refused a key ParseTarget can return: %v", k, err)
		}
		return
	}
	back, err := reboundgrpc.ParseTarget(tgt)
	if err != nil {
		t.Fatalf("ParseTarget(Target(%#v) = %q): %v", k, tgt, err)
	}
	if !sameKey(back, k) {
		t.Fatalf("ParseTarget(Target(%#v) = %q) = %#v", k, tgt, back)
	}
	// grpc-go parses the target the same way before Build sees it.
	u := mustTarget(t, tgt).URL
	if _, err := reboundgrpc.ParseTarget(u.String()); err != nil {
		t.Fatalf("the resolver.Target of %q: %v", tgt, err)
	}
}
