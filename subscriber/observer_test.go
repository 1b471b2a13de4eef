package subscriber_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// An observer is called with no lock held (it may read the subscription
// it observes) and a slow one stalls its own subscription, not another:
// while the observer is stuck on orders' first state change, payments
// subscribes and gets its list.
func TestObserverNotUnderLockStallsOnlyItsSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		payments := subscriber.Key{Service: "payments"}
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		reg.Set(payments, inst("10.0.0.2"))
		release := make(chan struct{})
		var stuck atomic.Bool
		var m *subscriber.Manager
		var mu sync.Mutex
		var seen []string // orders' states as its own Status reported them from inside the observer
		obs := rebound.ObserverFunc(func(e rebound.Event) {
			c, ok := e.Detail.(subscriber.SubscriptionEvent)
			if !ok || e.Kind != rebound.EventStateChanged || c.Key.Service != "orders" || c.To != subscriber.StateSubscribed {
				return
			}
			for _, st := range m.Status() { // would deadlock under the subscription's lock
				if st.Key.Service == "orders" {
					mu.Lock()
					seen = append(seen, st.State.String())
					mu.Unlock()
				}
			}
			if stuck.CompareAndSwap(false, true) {
				<-release
			}
		})
		m = newManager(t, reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(obs)))
		// Orders' events are handed to the observers by whichever of its
		// own goroutines released its lock first: its Subscribe call may
		// be the one that is stuck in the observer, so it runs apart.
		subscribed := make(chan struct{})
		go func() {
			defer close(subscribed)
			mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		}()
		synctest.Wait()
		if !stuck.Load() {
			t.Fatal("the observer never saw orders subscribed")
		}
		var rec recorder
		sp := mustSubscribe(t, m, payments, rec.listen)
		synctest.Wait()
		if st := sp.Status().State; st != subscriber.StateSubscribed || len(rec.get()) != 1 {
			t.Fatalf("payments while the observer is stuck on orders: %v, %d lists; want subscribed, 1", st, len(rec.get()))
		}
		for _, st := range m.Status() {
			if st.Key.Service == "orders" && st.State != subscriber.StateSubscribed {
				t.Fatalf("orders' Status while its observer is stuck = %v, want subscribed (Status is never blocked)", st.State)
			}
		}
		close(release)
		<-subscribed
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || seen[0] != "subscribed" {
			t.Fatalf("orders seen from the observer: %v, want [subscribed]", seen)
		}
	})
}

// Close from an observer returns ErrCalledFromCallback: from an observer
// of a subscription's event, and from an observer of the stop that Close
// itself causes, which runs on the goroutine calling Close (a sync.Once
// guarding the start of Close would deadlock there); the Manager finishes
// closing.
func TestCloseFromObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		var m *subscriber.Manager
		var mu sync.Mutex
		var errs []error
		obs := rebound.ObserverFunc(func(e rebound.Event) {
			if c, ok := e.Detail.(subscriber.SubscriptionEvent); ok && e.Kind == rebound.EventStateChanged && (c.To == subscriber.StateSubscribed || c.To == subscriber.StateStopped) {
				err := m.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		var err error
		m, err = subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(obs)))
		if err != nil {
			t.Fatal(err)
		}
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Done()
		if err := m.Close(); err != nil {
			t.Fatalf("Close from outside = %v", err)
		}
		// Second Manager: only the stop, caused by a Close from outside.
		m, err = subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if c, ok := e.Detail.(subscriber.SubscriptionEvent); ok && e.Kind == rebound.EventStateChanged && c.To == subscriber.StateStopped {
				err := m.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}))))
		if err != nil {
			t.Fatal(err)
		}
		mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		synctest.Wait()
		if err := m.Close(); err != nil {
			t.Fatalf("Close from outside = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) != 3 {
			t.Fatalf("observer saw %d subscribed/stopped changes, want 3", len(errs))
		}
		for _, err := range errs {
			if !errors.Is(err, rebound.ErrCalledFromCallback) {
				t.Fatalf("Close from an observer = %v, want rebound.ErrCalledFromCallback", err)
			}
		}
	})
}

// A panicking observer is recovered and logged; the subscription goes on
// and the next event is observed.
func TestObserverPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		var n atomic.Int32
		obs := subscriber.Hooks{Delivered: func(subscriber.Delivery) {
			if n.Add(1) == 1 {
				panic("observer bug")
			}
		}}
		m := newManager(t, reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(obs)), subscriber.WithLogger(zap.NewNop()))
		var rec recorder
		mustSubscribe(t, m, orders, rec.listen)
		synctest.Wait()
		reg.Set(orders, inst("10.0.0.9"))
		synctest.Wait()
		if n.Load() != 2 || len(rec.get()) != 2 {
			t.Fatalf("%d deliveries observed, %d lists delivered; want 2, 2", n.Load(), len(rec.get()))
		}
	})
}

// WithPolicy ignores a nil observer and an empty Hooks.
func TestWithObserverNil(t *testing.T) {
	var f rebound.ObserverFunc
	if rebound.WithObserver(nil) != nil || rebound.WithObserver(f) != nil {
		t.Fatal("WithObserver of nothing is an option")
	}
	m := newManager(t, subscribertest.New(), subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(nil),
		rebound.WithObserver(f), rebound.WithObserver(subscriber.Hooks{})))
	if subscriber.Observed(m) {
		t.Fatal("a Manager given observers of nothing has observers")
	}
}

// A slow observer of an event of the scheduler goroutine (here a retry
// that succeeded) holds the scheduler only until its rescue moves it to a
// new goroutine: the other subscription's retry, due at the same time,
// still runs.
func TestSlowObserverOnSchedulerStallsNoOtherRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		payments := subscriber.Key{Service: "payments"}
		reg.Set(orders, inst("10.0.0.1"))
		reg.Set(payments, inst("10.0.0.2"))
		reg.SetDown(true)
		release := make(chan struct{})
		var stuck atomic.Bool
		obs := subscriber.Hooks{StateChanged: func(c subscriber.StateChange) {
			if c.From == subscriber.StateRetrying && c.To == subscriber.StateSubscribed && stuck.CompareAndSwap(false, true) {
				<-release // the first of the two to recover blocks here
			}
		}}
		m := newManager(t, plain{reg}, subscriber.WithLimiter(nil),
			subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithObserver(obs)))
		a := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		b := mustSubscribe(t, m, payments, func([]subscriber.Instance) {})
		synctest.Wait()
		if a.Status().State != subscriber.StateRetrying || b.Status().State != subscriber.StateRetrying {
			t.Fatalf("states %v, %v; want both retrying", a.Status().State, b.Status().State)
		}
		reg.SetDown(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !stuck.Load() {
			t.Fatal("no retry recovered")
		}
		if sa, sb := a.Status().State, b.Status().State; sa != subscriber.StateSubscribed || sb != subscriber.StateSubscribed {
			t.Fatalf("while an observer is stuck on one recovery: %v, %v; want both subscribed", sa, sb)
		}
		close(release)
	})
}

// A subscription's attempts are events too, the ones its retry log
// observes: EventAttempt for each Registry.Subscribe call, then EventRetry
// (with the delay) after a failure.
func TestSubscribeAttemptEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		reg.SetDown(true)
		var mu sync.Mutex
		var got []string
		var typed, foreign int
		obs := rebound.ObserverFunc(func(e rebound.Event) {
			if _, ok := e.Detail.(subscriber.SubscriptionEvent); ok && (e.Kind == rebound.EventAttempt || e.Kind == rebound.EventRetry || e.Kind == rebound.EventGiveUp) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%v %d %v %v", e.Kind, e.Attempt, e.Err != nil, e.Delay))
				mu.Unlock()
			}
			if e.Detail == nil { // the engine's own events stay with the Manager
				mu.Lock()
				foreign++
				mu.Unlock()
			}
		})
		h := subscriber.Hooks{Attempted: func(subscriber.SubscribeAttempt) { mu.Lock(); typed++; mu.Unlock() }}
		m := newManager(t, plain{reg}, subscriber.WithLimiter(nil),
			subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithObserver(obs), rebound.WithObserver(h)))
		mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		synctest.Wait()
		reg.SetDown(false)
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []string{"attempt 1 true 1s", "retry 1 true 1s", "attempt 2 false 0s"}
		if !slices.Equal(got, want) || typed != 2 || foreign != 0 {
			t.Fatalf("attempt events %q (typed %d, %d without a Detail), want %q (typed 2, 0)", got, typed, foreign, want)
		}
	})
}
