package reboundgrpc_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// TestResolverStuckAfterPermanentStop: one permanent answer to a
// re-subscription (etcd's PermissionDenied while a role is rotated, which
// the etcd adapter marks rebound.Permanent) stops the key's subscription
// for good. A ClientConn built before keeps its last list and hears the
// error; its next ResolveNow (what grpc calls on transient failures)
// subscribes again, as a new Build does, and it follows the registry
// again. Before, it kept the stopped View: it never got another list while
// a new ClientConn of the same target had the registry's.
func TestResolverStuckAfterPermanentStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		reg.Set(orders, inst(1))
		old := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), old, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		denied := rebound.Permanent(errors.New("permission denied"))
		reg.SetFailure(func(subscriber.Key) error { return denied })
		reg.Break(orders) // the watch fails; the re-subscription is refused for good
		time.Sleep(time.Minute)
		synctest.Wait()
		reg.SetFailure(nil) // the permission is back
		reg.Set(orders, inst(1), inst(2))
		fresh := newFakeCC()
		r2, err := b.Build(mustTarget(t, "rebound:///orders"), fresh, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		for range 60 {
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(time.Second)
		}
		synctest.Wait()
		oldStates, oldErrs := old.snapshot()
		freshStates, _ := fresh.snapshot()
		if len(freshStates) == 0 || freshStates[len(freshStates)-1] != 2 {
			t.Fatalf("a new ClientConn got states %v; want the registry's 2 endpoints", freshStates)
		}
		if oldStates[len(oldStates)-1] != 2 {
			t.Fatalf("the ClientConn built before the stop: states %v, errors %v; a new ClientConn of the same "+
				"target has 2 endpoints; ResolveNow did not subscribe this one again", oldStates, oldErrs)
		}
	})
}

// TestResolveNowAfterStopPaced: while the registry keeps refusing the
// key for good, a ClientConn's ResolveNow calls subscribe again at most
// once per WithResolveNowInterval (6 s), not once per call.
func TestResolveNowAfterStopPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		reg.Set(orders, inst(1))
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		denied := rebound.Permanent(errors.New("permission denied"))
		reg.SetFailure(func(subscriber.Key) error { return denied })
		reg.Break(orders)
		time.Sleep(time.Minute)
		synctest.Wait()
		before := reg.Stats().Subscribes
		for range 100 { // 100 calls in 10 s
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		got := reg.Stats().Subscribes - before
		// At 0 s and 6 s; the third waits for 12 s.
		if got < 1 || got > 2 {
			t.Fatalf("100 ResolveNow calls in 10 s of a key refused for good: %d Subscribe calls, want 1 or 2 (one per 6 s)", got)
		}
		if states, _ := f.snapshot(); states[len(states)-1] != 1 {
			t.Fatalf("states %v: the ClientConn lost its last list", states)
		}
	})
}
