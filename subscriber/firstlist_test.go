package subscriber_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The empty first list (issue 9, default outage demo): a subscription
// created during an outage, or just after the registry restarted empty,
// reaches the restarted registry before the providers have re-registered.
// Its first list, if empty, is held like an empty list replacing a
// non-empty one: until the providers' list arrives, or the hold's cap
// passes (a truly empty service is still seen empty).

const firstHold = 30 * time.Second

// firstStatus returns the Manager's status of s.
func firstStatus(t *testing.T, s *subscriber.Subscription) subscriber.Status {
	t.Helper()
	return s.Status()
}

// assertHeldFirst checks that s holds back an empty first list.
func assertHeldFirst(t *testing.T, s *subscriber.Subscription, rec *recorder) {
	t.Helper()
	if calls := rec.ips(); len(calls) != 0 {
		t.Fatalf("listener calls %v, want none while the empty first list is held", calls)
	}
	st := firstStatus(t, s)
	if st.HeldSince.IsZero() || !strings.HasPrefix(st.HeldReason, "first list empty") {
		t.Fatalf("status %+v, want an empty first list held (HeldSince set, HeldReason \"first list empty...\")", st)
	}
	if st.State != subscriber.StateHeld {
		t.Fatalf("state %v, want %v", st.State, subscriber.StateHeld)
	}
	if !isClosed(s.Ready()) {
		t.Fatal("Ready not closed: the registry acknowledged the subscription")
	}
	if max := st.HeldSince.Add(firstHold); st.HeldUntil.After(max) {
		t.Fatalf("HeldUntil %v after the cap %v", st.HeldUntil, max)
	}
}

// TestEmptyFirstListHeldAfterReconnect: the providers re-register while the
// empty first list is held; the listener's first call is their list.
func TestEmptyFirstListHeldAfterReconnect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, reg *subscribertest.Registry, m *subscriber.Manager, rec *recorder) *subscriber.Subscription
	}{
		{"created during the outage", func(t *testing.T, reg *subscribertest.Registry, m *subscriber.Manager, rec *recorder) *subscriber.Subscription {
			reg.SetDown(true)
			synctest.Wait()
			reg.Set(orders) // the registry will restart empty
			s := mustSubscribe(t, m, orders, rec.listen)
			time.Sleep(20 * time.Second)
			synctest.Wait()
			reg.SetDown(false)
			time.Sleep(5 * time.Second) // the retry reaches the restarted registry
			synctest.Wait()
			return s
		}},
		{"Manager started during the outage", func(t *testing.T, reg *subscribertest.Registry, _ *subscriber.Manager, rec *recorder) *subscriber.Subscription {
			// A consumer restarted during the outage: a new Manager whose
			// monitor starts with Disconnected.
			reg.SetDown(true)
			synctest.Wait()
			reg.Set(orders)
			m := newManager(t, reg, subscriber.WithEmptyListHold(firstHold))
			s := mustSubscribe(t, m, orders, rec.listen)
			time.Sleep(20 * time.Second)
			synctest.Wait()
			reg.SetDown(false)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			return s
		}},
		{"created just after the restart", func(t *testing.T, reg *subscribertest.Registry, m *subscriber.Manager, rec *recorder) *subscriber.Subscription {
			reg.Set(orders)
			reg.Restart()
			synctest.Wait()
			time.Sleep(2 * time.Second)
			s := mustSubscribe(t, m, orders, rec.listen)
			<-s.Ready()
			synctest.Wait()
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				reg.Set(orders, inst("10.0.0.1"))
				m := newManager(t, reg, subscriber.WithEmptyListHold(firstHold))
				synctest.Wait() // the monitor runs
				var rec recorder
				s := tc.setup(t, reg, m, &rec)
				assertHeldFirst(t, s, &rec)
				time.Sleep(5 * time.Second)
				reg.Set(orders, inst("10.0.0.1")) // the providers re-register
				synctest.Wait()
				if got := rec.ips(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "10.0.0.1" {
					t.Fatalf("listener calls %v, want one: [[10.0.0.1]]", got)
				}
				if st := s.Status(); st.State != subscriber.StateSubscribed || !st.HeldSince.IsZero() {
					t.Fatalf("status %+v, want subscribed, nothing held", st)
				}
				// Nothing more: the held empty list is never delivered.
				time.Sleep(2 * firstHold)
				synctest.Wait()
				if got := rec.ips(); len(got) != 1 {
					t.Fatalf("listener calls %v, want only the providers' list", got)
				}
			})
		})
	}
}

// TestEmptyFirstListDeliveredAtTheCap: last-known-good never hides the
// truth: a service that stays empty is seen empty once the hold's cap has
// passed, and not held at all outside a reconnect window.
func TestEmptyFirstListDeliveredAtTheCap(t *testing.T) {
	t.Run("truly empty after a reconnect", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := subscribertest.New()
			m := newManager(t, reg, subscriber.WithEmptyListHold(firstHold))
			synctest.Wait() // the monitor runs
			reg.SetDown(true)
			synctest.Wait()
			var rec recorder
			s := mustSubscribe(t, m, orders, rec.listen)
			time.Sleep(10 * time.Second)
			reg.SetDown(false)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			assertHeldFirst(t, s, &rec)
			since := s.Status().HeldSince
			time.Sleep(firstHold + subscriber.MaxTimerSlack + time.Second)
			synctest.Wait()
			rec.mu.Lock()
			calls, times := rec.calls, rec.times
			rec.mu.Unlock()
			if len(calls) != 1 || len(calls[0]) != 0 {
				t.Fatalf("listener calls %v, want the empty list once the cap passed", rec.ips())
			}
			if d := times[0].Sub(since); d > firstHold+subscriber.MaxTimerSlack {
				t.Fatalf("empty list delivered %v after it arrived, want at most the hold %v (+ slack)", d, firstHold)
			}
			if st := s.Status(); st.State != subscriber.StateSubscribed || !st.HeldSince.IsZero() || st.Instances != 0 {
				t.Fatalf("status %+v, want subscribed with 0 instances, nothing held", st)
			}
		})
	})
	for _, tc := range []struct {
		name  string
		setup func(reg *subscribertest.Registry)
	}{
		{"no reconnect seen", func(*subscribertest.Registry) {}},
		{"created after the window", func(reg *subscribertest.Registry) {
			reg.Restart()
			synctest.Wait()
			time.Sleep(firstHold + time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				m := newManager(t, reg, subscriber.WithEmptyListHold(firstHold))
				synctest.Wait() // the monitor runs
				tc.setup(reg)
				var rec recorder
				s := mustSubscribe(t, m, orders, rec.listen)
				<-s.Ready()
				synctest.Wait()
				if got := rec.ips(); len(got) != 1 || len(got[0]) != 0 {
					t.Fatalf("listener calls %v, want the empty list at once", got)
				}
				if st := s.Status(); !st.HeldSince.IsZero() || st.State != subscriber.StateSubscribed {
					t.Fatalf("status %+v, want subscribed, nothing held", st)
				}
			})
		})
	}
}
