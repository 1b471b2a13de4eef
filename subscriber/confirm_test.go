package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// With an adapter confirming reconnects whose redo works, a registry restart costs the
// Manager no request at all: the adapter's evidence confirms every
// subscription.
func TestConfirmsReconnectsSendsNothingWhenTheRedoWorked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		reg := subscribertest.New()
		reg.EnableRedo(nil)
		m := newManager(t, reg)
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			subs[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
			<-subs[i].Ready()
		}
		synctest.Wait() // the monitor is running
		before := reg.Stats()
		for range 3 {
			reg.Restart()
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		after := reg.Stats()
		if got := after.Subscribes - before.Subscribes; got != 0 {
			t.Errorf("Manager sent %d Subscribe requests over 3 restarts, want 0 (the redo worked)", got)
		}
		if after.Active != n {
			t.Errorf("active = %d, want %d", after.Active, n)
		}
		for _, st := range m.Status() {
			if st.State != subscriber.StateSubscribed || st.ConfirmReason != "push" || st.ConfirmedAt.IsZero() || !st.ConfirmDeadline.IsZero() {
				t.Errorf("status %+v, want subscribed, confirmed by push, no deadline", st)
			}
		}
	})
}

// A rejected redo (the adapter calls Resubscribe) is confirmed by the
// Manager for that subscription alone, once.
func TestConfirmsReconnectsRejectedRedoIsRetriedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		bad := subscriber.Key{Service: "bad"}
		reg.EnableRedo(func(k subscriber.Key) subscribertest.RedoOutcome {
			if k.Service == bad.Service {
				return subscribertest.RedoReject
			}
			return subscribertest.RedoConfirm
		})
		m := newManager(t, reg)
		var bads atomic.Int64
		reg.OnSubscribe(func(k subscriber.Key) {
			if k.Service == bad.Service {
				bads.Add(1)
			}
		})
		for _, k := range []subscriber.Key{orders, bad} {
			<-mustSubscribe(t, m, k, func([]subscriber.Instance) {}).Ready()
		}
		synctest.Wait() // the monitor is running
		bads.Store(0)
		before := reg.Stats()
		reg.Restart()
		time.Sleep(time.Minute)
		synctest.Wait()
		after := reg.Stats()
		if got := after.Subscribes - before.Subscribes; got != 1 || bads.Load() != 1 {
			t.Errorf("Manager sent %d Subscribe requests (%d for %v), want exactly 1, for the rejected one", got, bads.Load(), bad)
		}
		if reg.Subscribed(bad) != 1 || reg.Subscribed(orders) != 1 {
			t.Errorf("subscribed at the registry: bad %d, orders %d; want 1 and 1", reg.Subscribed(bad), reg.Subscribed(orders))
		}
	})
}

// A lost redo that the adapter never reports is caught by the Manager's
// safety cap.
func TestConfirmsReconnectsSafetyCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.EnableRedo(func(subscriber.Key) subscribertest.RedoOutcome { return subscribertest.RedoSilent })
		m := newManager(t, reg, subscriber.WithConfirmTimeout(10*time.Second))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		synctest.Wait() // the monitor is running
		reg.Restart()
		time.Sleep(time.Second)
		synctest.Wait()
		st := s.Status()
		if st.State != subscriber.StateRetrying || st.ConfirmDeadline.IsZero() {
			t.Fatalf("status before the cap %+v, want retrying with a deadline", st)
		}
		if reg.Subscribed(orders) != 0 {
			t.Fatal("Manager confirmed before the cap")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		st = s.Status()
		if st.State != subscriber.StateSubscribed || reg.Subscribed(orders) != 1 {
			t.Fatalf("status after the cap %+v (registry holds %d), want subscribed", st, reg.Subscribed(orders))
		}
	})
}

// Refresh is coalesced and paced: 1,000 calls make a bounded number of
// registry requests, a Lookup with a Reconciler, a Subscribe without.
func TestRefreshIsCoalesced(t *testing.T) {
	for _, withLookup := range []bool{true, false} {
		t.Run(fmt.Sprint("lookup=", withLookup), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				var r subscriber.Registry = reg
				if !withLookup {
					r = plain{reg}
				}
				m := newManager(t, r, subscriber.WithRefreshInterval(5*time.Second))
				s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
				<-s.Ready()
				before := reg.Stats()
				for i := range 1000 {
					s.Refresh()
					if i%100 == 0 {
						time.Sleep(time.Second) // 10 s in all
					}
				}
				synctest.Wait()
				after := reg.Stats()
				got := after.Subscribes - before.Subscribes + after.Lookups - before.Lookups
				if got < 1 || got > 3 {
					t.Errorf("1,000 Refresh calls over 10 s made %d requests, want 1..3 (one per 5 s)", got)
				}
				if withLookup && after.Subscribes != before.Subscribes {
					t.Errorf("Refresh with a Reconciler sent %d Subscribes, want Lookups only", after.Subscribes-before.Subscribes)
				}
				if st := s.Status(); st.State != subscriber.StateSubscribed {
					t.Errorf("state %v after refreshes, want subscribed", st.State)
				}
			})
		})
	}
}

// Item 5: periodic reconciliation catches silent loss without a connection
// change (a server that forgot the subscriber, so a change is never
// pushed), delivers the truth and resubscribes; its cost is one read per
// subscription per period.
func TestReconcileRepairsSilentLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = time.Minute
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg, subscriber.WithReconcile(period))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		before := reg.Stats()
		time.Sleep(10 * period)
		synctest.Wait()
		after := reg.Stats()
		if got := after.Lookups - before.Lookups; got < 8 || got > 14 {
			t.Fatalf("%d lookups in 10 periods, want about 10", got)
		}
		if after.Subscribes != before.Subscribes {
			t.Fatalf("reconciliation of an intact subscription resubscribed %d times", after.Subscribes-before.Subscribes)
		}

		reg.Forget()                      // the server forgets the subscriber
		reg.Set(orders, inst("10.0.0.2")) // the change is never pushed
		synctest.Wait()
		if got := lastIPs(&rec); len(got) != 1 || got[0] != "10.0.0.1" {
			t.Fatalf("list %v before reconciliation", got)
		}
		time.Sleep(2 * period)
		synctest.Wait()
		if got := lastIPs(&rec); len(got) != 1 || got[0] != "10.0.0.2" {
			t.Fatalf("list %v after reconciliation, want the registry's 10.0.0.2", got)
		}
		if reg.Subscribed(orders) != 1 {
			t.Fatal("reconciliation did not resubscribe")
		}
		if got := rec.ips(); len(got) != 2 {
			t.Fatalf("listener calls %v, want exactly one repair delivery", got)
		}
		reg.Set(orders, inst("10.0.0.3")) // pushed again
		synctest.Wait()
		if got := lastIPs(&rec); got[0] != "10.0.0.3" {
			t.Fatalf("list %v after the repair, want pushes again", got)
		}
		if _, err := subscriber.New(reg, subscriber.WithReconcile(time.Millisecond)); err == nil {
			t.Fatal("WithReconcile(1ms) accepted")
		}
	})
}

// noLookup is a Reconciler that cannot read.
type noLookup struct{ *subscribertest.Registry }

func (noLookup) Lookup(context.Context, subscriber.Key) ([]subscriber.Instance, error) {
	return nil, rebound.Permanent(errors.New("lookups unsupported"))
}

// A Reconciler whose Lookup fails for good: Refresh falls back to a paced
// Subscribe, and lookups stop.
func TestRefreshFallsBackWhenLookupIsUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m := newManager(t, noLookup{reg}, subscriber.WithRefreshInterval(time.Second))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		synctest.Wait()
		before := reg.Stats().Subscribes
		s.Refresh() // a failed lookup, then a Subscribe
		time.Sleep(2 * time.Second)
		synctest.Wait()
		s.Refresh() // a Subscribe at once
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := reg.Stats().Subscribes - before; got != 2 {
			t.Fatalf("%d Subscribes for 2 refreshes without lookups, want 2", got)
		}
		if st := s.Status(); st.State != subscriber.StateSubscribed {
			t.Fatalf("status %+v", st)
		}
	})
}
