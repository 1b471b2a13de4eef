package subscriber_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// noReconciler hides the test registry's Lookup: a Registry and
// ConnectionMonitor that is not a Reconciler.
type noReconciler struct {
	subscriber.Registry
	subscriber.ConnectionMonitor
}

// heldAfterRestart subscribes to orders with one provider, restarts the
// registry empty and waits until the Manager holds the empty list.
func heldAfterRestart(t *testing.T, reg *subscribertest.Registry, m *subscriber.Manager, rec *recorder) *subscriber.Subscription {
	t.Helper()
	s := mustSubscribe(t, m, orders, rec.listen)
	<-s.Ready()
	synctest.Wait()
	reg.Restart()
	reg.Set(orders) // the restarted registry has lost the providers
	synctest.Wait()
	if st := s.Status(); st.State != subscriber.StateHeld {
		t.Fatalf("the empty list of the restarted registry is not held: %+v", st)
	}
	return s
}

// aMinuteLater lets a minute pass and checks what the listener got and how
// many Lookups were made since before.
func aMinuteLater(t *testing.T, reg *subscribertest.Registry, rec *recorder, before subscribertest.Stats, want [][]string, lookups int) {
	t.Helper()
	time.Sleep(time.Minute)
	synctest.Wait()
	if calls := rec.ips(); !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("listener calls %v, want %v", calls, want)
	}
	if got := reg.Stats(); got.Lookups-before.Lookups != lookups {
		t.Fatalf("%d lookups in all, want %d", got.Lookups-before.Lookups, lookups)
	}
}

// An empty list held after a restart is checked against the server: when
// the providers' re-registration push is lost (the adapter's client kept
// the empty reply), the first check, hold/8 after the empty list arrived,
// finds the providers, ends the hold without an empty list reaching the
// listener and resubscribes once. Without the check the listener got the
// empty list at the hold's cap and kept it.
func TestHeldEmptyListCheckedAgainstTheServer(t *testing.T) {
	const hold = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg, subscriber.WithEmptyListHold(hold))
		var rec recorder
		s := heldAfterRestart(t, reg, m, &rec)
		since := s.Status().HeldSince
		if n := reg.LoseNextPush(orders); n != 1 {
			t.Fatalf("LoseNextPush = %d, want 1", n)
		}
		reg.Set(orders, inst("10.0.0.1")) // re-registered; its push is lost
		before := reg.Stats()
		if before.PushesLost != 1 {
			t.Fatalf("PushesLost = %d, want 1", before.PushesLost)
		}

		time.Sleep(time.Until(since.Add(hold/8)) - time.Millisecond)
		synctest.Wait()
		if st, got := s.Status(), reg.Stats(); st.State != subscriber.StateHeld || got.Lookups != before.Lookups {
			t.Fatalf("before hold/8: %+v, %d lookups (want still held, none)", st, got.Lookups-before.Lookups)
		}
		time.Sleep(subscriber.MaxTimerSlack + time.Millisecond)
		synctest.Wait()
		st, got := s.Status(), reg.Stats()
		if st.State != subscriber.StateSubscribed || !st.HeldSince.IsZero() || st.Instances != 1 {
			t.Fatalf("after the first check: %+v, want subscribed, not held, 1 instance", st)
		}
		if got.Lookups-before.Lookups != 1 || got.Subscribes-before.Subscribes != 1 {
			t.Fatalf("the check cost %d lookups and %d subscribes, want 1 and 1 (the repair)",
				got.Lookups-before.Lookups, got.Subscribes-before.Subscribes)
		}
		aMinuteLater(t, reg, &rec, before, [][]string{{"10.0.0.1"}}, 1) // no empty list
	})
}

// A registry that really holds no instance keeps the hold: three checks
// (hold/8, hold/4, hold/2) find it empty, and the empty list is delivered
// at the cap, as without checks.
func TestHeldEmptyListTheServerAlsoHasEmpty(t *testing.T) {
	const hold = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg, subscriber.WithEmptyListHold(hold))
		var rec recorder
		s := heldAfterRestart(t, reg, m, &rec)
		before := reg.Stats()
		time.Sleep(hold - time.Second)
		synctest.Wait()
		if st, got := s.Status(), reg.Stats(); st.State != subscriber.StateHeld || got.Lookups-before.Lookups != 3 ||
			got.Subscribes != before.Subscribes {
			t.Fatalf("just before the cap: %+v, %d lookups and %d subscribes, want held, 3 and 0",
				st, got.Lookups-before.Lookups, got.Subscribes-before.Subscribes)
		}
		aMinuteLater(t, reg, &rec, before, [][]string{{"10.0.0.1"}, {}}, 3)
	})
}

// Without a Reconciler nothing can check: a lost re-registration push
// leaves the hold to its cap, and the listener then gets the empty list
// (the limit the check removes).
func TestHeldEmptyListWithoutAReconciler(t *testing.T) {
	const hold = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, noReconciler{reg, reg}, subscriber.WithEmptyListHold(hold))
		var rec recorder
		heldAfterRestart(t, reg, m, &rec)
		reg.LoseNextPush(orders)
		reg.Set(orders, inst("10.0.0.1"))
		aMinuteLater(t, reg, &rec, subscribertest.Stats{}, [][]string{{"10.0.0.1"}, {}}, 0)
	})
}
