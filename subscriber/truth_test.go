package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// siblings models an adapter that shares one client subscription per key
// (as subscriber/nacos does over nacos-sdk-go): when one sink of a key
// unsubscribes it re-subscribes the key and asks the others to confirm
// again (Sink.Resubscribe).
type siblings struct {
	*subscribertest.Registry
	mu    sync.Mutex
	sinks map[subscriber.Sink]subscriber.Key
}

func newSiblings(reg *subscribertest.Registry) *siblings {
	return &siblings{Registry: reg, sinks: map[subscriber.Sink]subscriber.Key{}}
}

func (s *siblings) Subscribe(ctx context.Context, k subscriber.Key, sink subscriber.Sink) error {
	err := s.Registry.Subscribe(ctx, k, sink)
	if err == nil {
		s.mu.Lock()
		s.sinks[sink] = k
		s.mu.Unlock()
	}
	return err
}

func (s *siblings) Unsubscribe(ctx context.Context, k subscriber.Key, sink subscriber.Sink) error {
	s.mu.Lock()
	delete(s.sinks, sink)
	var others []subscriber.Sink
	for o, ok := range s.sinks {
		if ok.String() == k.String() {
			others = append(others, o)
		}
	}
	s.mu.Unlock()
	for _, o := range others {
		o.Resubscribe(errors.New("another subscription of the key unsubscribed"))
	}
	return s.Registry.Unsubscribe(ctx, k, sink)
}

// lastIPs returns the IPs of the last list a recorder got.
func lastIPs(r *recorder) []string {
	ips := r.ips()
	if len(ips) == 0 {
		return nil
	}
	return ips[len(ips)-1]
}

// Item 3: with two subscriptions of one key, unsubscribing one does not
// make the other hold back a real deregistration (the registry is healthy
// throughout).
func TestUnsubscribingASiblingDoesNotHideADeregistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, newSiblings(reg))
		var a, b recorder
		sa := mustSubscribe(t, m, orders, a.listen)
		sb := mustSubscribe(t, m, orders, b.listen)
		<-sa.Ready()
		<-sb.Ready()
		synctest.Wait()
		if err := sa.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		reg.Set(orders) // the provider deregisters
		synctest.Wait()
		if got := lastIPs(&b); len(got) != 0 {
			t.Fatalf("remaining listener still has %v after a real deregistration; calls %v", got, b.ips())
		}
		if st := sb.Status(); st.State != subscriber.StateSubscribed || !st.HeldSince.IsZero() {
			t.Fatalf("status %+v, want subscribed, nothing held", st)
		}
	})
}

// Item 3: subscribe/unsubscribe churn of a sibling does not extend the
// hold: a dead service is seen empty while the churn goes on.
func TestSiblingChurnDoesNotExtendTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = 30 * time.Second
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, newSiblings(reg), subscriber.WithEmptyListHold(hold))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		// A real restart first, so that a hold window is open.
		reg.Restart()
		synctest.Wait()
		reg.Set(orders) // the service dies
		start := time.Now()
		var seenEmpty time.Duration = -1
		for time.Since(start) < 5*time.Minute {
			sib := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
			time.Sleep(2 * time.Second)
			if err := sib.Unsubscribe(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if got := lastIPs(&rec); got != nil && len(got) == 0 && seenEmpty < 0 {
				seenEmpty = time.Since(start)
			}
		}
		if seenEmpty < 0 || seenEmpty > hold+subscriber.MaxTimerSlack+3*time.Second {
			t.Fatalf("empty list seen after %v of sibling churn, want within the hold %v; calls %v", seenEmpty, hold, rec.ips())
		}
	})
}

// Item 3: the hold applies only after a real registry disconnection or
// restart: an adapter's Resubscribe (a watch failure) does not open it.
func TestHoldOnlyAfterARealDisconnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg, subscriber.WithEmptyListHold(30*time.Second))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		reg.Break(orders) // Sink.Resubscribe
		reg.Set(orders)   // meanwhile the provider deregisters
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := lastIPs(&rec); got == nil || len(got) != 0 {
			t.Fatalf("calls %v, want the empty list at once after a Resubscribe", rec.ips())
		}
	})
}

// Item 4: one request per subscription per reconnect, whether the
// subscriptions were idle (a clean restart) or retrying through an outage.
func TestOneRequestPerReconnect(t *testing.T) {
	for _, outage := range []time.Duration{0, 5 * time.Minute} {
		t.Run(fmt.Sprint("outage=", outage), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 50
				reg := subscribertest.New()
				m := newManager(t, reg)
				for i := range n {
					<-mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {}).Ready()
				}
				synctest.Wait()
				if outage == 0 {
					before := reg.Stats().Subscribes
					reg.Restart()
					time.Sleep(time.Minute)
					synctest.Wait()
					if got := reg.Stats().Subscribes - before; got != n {
						t.Fatalf("%d Subscribe requests for a clean restart of %d subscriptions, want exactly %d", got, n, n)
					}
				} else {
					reg.SetDown(true)
					time.Sleep(outage)
					synctest.Wait()
					before := reg.Stats().Subscribes
					reg.SetDown(false)
					time.Sleep(time.Minute)
					synctest.Wait()
					if got := reg.Stats().Subscribes - before; got != n {
						t.Fatalf("%d Subscribe requests after the outage for %d subscriptions, want exactly %d", got, n, n)
					}
				}
				if st := reg.Stats(); st.Active != n {
					t.Fatalf("active %d, want %d", st.Active, n)
				}
				// No second confirmation later either.
				before := reg.Stats().Subscribes
				time.Sleep(time.Hour)
				synctest.Wait()
				if got := reg.Stats().Subscribes - before; got != 0 {
					t.Fatalf("%d more Subscribe requests in the hour after, want 0", got)
				}
			})
		})
	}
}

// Item 8: a subscription whose Subscribe ctx ends logs it at Info and stays
// visible in Status as stopped, with the reason; retention is bounded.
func TestStoppedByContextIsLoggedAndVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		reg := subscribertest.New()
		m := newManager(t, reg, subscriber.WithLogger(zap.New(core)))
		const n, kept = 105, 100 // Status keeps the last 100 stopped
		var cancels []context.CancelFunc
		for i := range n {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancels = append(cancels, func() { cancel(fmt.Errorf("caller %d gone", i)) })
			<-mustSubscribeCtx(t, m, ctx, subscriber.Key{Service: fmt.Sprint("svc", i)}).Ready()
		}
		for _, c := range cancels {
			c()
		}
		synctest.Wait()
		if got := logs.FilterMessage("subscription stopped").FilterLevelExact(zapcore.InfoLevel).Len(); got != n {
			t.Fatalf("%d Info lines for %d subscriptions stopped by their context, want %d", got, n, n)
		}
		all := m.Status()
		if len(all) != kept {
			t.Fatalf("Status has %d entries, want the last %d stopped (retention)", len(all), kept)
		}
		for i, st := range all {
			if st.State != subscriber.StateStopped || st.LastErr == nil || st.LastErr.Error() != fmt.Sprintf("caller %d gone", st.ID-1) {
				t.Fatalf("entry %d: %+v, want stopped by its caller", i, st)
			}
		}
		c := m.Counts()
		if c.ByState[subscriber.StateStopped] != kept || c.Stopped != n || c.ByState[subscriber.StateSubscribed] != 0 {
			t.Fatalf("counts %+v", c)
		}
	})
}

func mustSubscribeCtx(t *testing.T, m *subscriber.Manager, ctx context.Context, key subscriber.Key) *subscriber.Subscription {
	t.Helper()
	s, err := m.Subscribe(ctx, key, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue 12 item 1: hooks see every state change in order, deliveries with
// their result, confirmations and reconnects; a slow hook stalls no
// subscription; a full queue drops and counts.
func TestHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		record := func(s string) {
			mu.Lock()
			events = append(events, s)
			mu.Unlock()
		}
		release := make(chan struct{})
		var slow atomic.Bool
		h := subscriber.Hooks{
			StateChanged: func(c subscriber.StateChange) {
				if slow.Load() {
					<-release
				}
				record(fmt.Sprintf("state %v %v->%v", c.Key, c.From, c.To))
			},
			Delivered: func(d subscriber.Delivery) { record(fmt.Sprintf("delivery %v %v %d", d.Key, d.Result, d.Instances)) },
			Confirmed: func(c subscriber.Confirmation) { record(fmt.Sprintf("confirmed %v %s", c.Key, c.Reason)) },
			Connection: func(c subscriber.ConnectionChange) {
				record(fmt.Sprintf("connection %v %d", c.Connected, c.Subscriptions))
			},
		}
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		q, err := rebound.NewQueue(h, 8, nil) // a slow hook must stall nothing: queue it
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		m := newManager(t, reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(q)))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		reg.Set(orders, inst("10.0.0.1")) // a duplicate
		synctest.Wait()
		reg.Restart()
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(events)
		mu.Unlock()
		// Events of one kind come in order; deliveries and state changes of
		// one subscription come from different goroutines (the listener's
		// and the registry call's), so their interleaving is not fixed.
		want := map[string][]string{
			"state": {"state orders State(0)->pending", "state orders pending->subscribed",
				"state orders subscribed->retrying", "state orders retrying->subscribed"},
			"delivery":   {"delivery orders delivered 1", "delivery orders duplicate 1", "delivery orders duplicate 1"},
			"confirmed":  {"confirmed orders subscribe", "confirmed orders subscribe"},
			"connection": {"connection false 1", "connection true 1"},
		}
		for kind, w := range want {
			var g []string
			for _, e := range got {
				if strings.HasPrefix(e, kind+" ") {
					g = append(g, e)
				}
			}
			if !slices.Equal(g, w) {
				t.Errorf("%s events %q, want %q (all: %q)", kind, g, w, got)
			}
		}
		// A state change is reported before the next one is caused: the
		// disconnection precedes retrying, and the reconnection the
		// confirmation.
		if i, j := slices.Index(got, "connection false 1"), slices.Index(got, "state orders subscribed->retrying"); i > j {
			t.Errorf("retrying reported before the disconnection: %q", got)
		}

		// A slow hook: the subscription keeps delivering; events beyond
		// the queue are dropped and counted.
		slow.Store(true)
		reg.Restart() // a state change: the hook blocks
		time.Sleep(time.Minute)
		synctest.Wait()
		for i := range 20 {
			reg.Set(orders, inst(fmt.Sprintf("10.0.1.%d", i)))
			synctest.Wait()
		}
		if got := lastIPs(&rec); len(got) != 1 || got[0] != "10.0.1.19" {
			t.Fatalf("listener got %v while a hook is stuck, want the latest list", got)
		}
		if q.Dropped() == 0 {
			t.Fatalf("queue dropped %d events, want some", q.Dropped())
		}
		close(release)
	})
}

// Issue 10: Close from a listener does not deadlock: it starts closing and
// returns ErrCalledFromCallback; the Manager finishes after the listener.
func TestCloseFromListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		mustSubscribe(t, m, orders, func([]subscriber.Instance) { got <- m.Close() })
		if err := <-got; !errors.Is(err, rebound.ErrCalledFromCallback) {
			t.Fatalf("Close from a listener = %v, want ErrCalledFromCallback", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close after: %v", err)
		}
		if _, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {}); !errors.Is(err, subscriber.ErrManagerClosed) || !errors.Is(err, rebound.ErrClosed) {
			t.Fatalf("Subscribe after Close: %v, want ErrManagerClosed matching rebound.ErrClosed", err)
		}
	})
}

// Issue 10: bad arguments are *rebound.ArgumentError with a qualified
// Func; a service name of spaces is rejected.
func TestArgumentErrorsAreTheRootType(t *testing.T) {
	m := newManager(t, subscribertest.New())
	_, err := m.Subscribe(context.Background(), subscriber.Key{Service: "   "}, func([]subscriber.Instance) {})
	var ae *rebound.ArgumentError
	if !errors.As(err, &ae) || ae.Arg != "key.Service" || ae.Func != "subscriber.Manager.Subscribe" || !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("Subscribe with a blank service: %v (%+v)", err, ae)
	}
	if _, err := subscriber.New(subscribertest.New(), subscriber.WithEmptyListHold(-1)); !errors.As(err, &ae) || ae.Func != "subscriber.WithEmptyListHold" {
		t.Fatalf("New with a bad option: %v", err)
	}
	for _, k := range []struct {
		k    subscriber.Key
		want string
	}{
		{subscriber.Key{Service: "orders"}, "orders"},
		{subscriber.Key{Group: "DEFAULT_GROUP", Service: "orders"}, "DEFAULT_GROUP/orders"},
		{subscriber.Key{Namespace: "dev", Group: "g", Service: "orders", Clusters: []string{"b", "a"}}, "dev/g/orders[a,b]"},
	} {
		if got := k.k.String(); got != k.want {
			t.Errorf("%#v.String() = %q, want %q", k.k, got, k.want)
		}
	}
}

// Retries run on shared runner goroutines: one attempt that blocks in the
// registry does not hold up the retries of other subscriptions.
func TestBlockedAttemptDoesNotStallOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		slowKey := subscriber.Key{Service: "slow"}
		release := make(chan struct{})
		var calls sync.Map // service -> *atomic.Int64
		reg.SetFailure(func(k subscriber.Key) error {
			v, _ := calls.LoadOrStore(k.Service, new(atomic.Int64))
			if v.(*atomic.Int64).Add(1) == 2 && k.Service == slowKey.Service {
				<-release // the first retry of "slow" blocks
			}
			return errors.New("server error")
		})
		m := newManager(t, reg)
		mustSubscribe(t, m, slowKey, func([]subscriber.Instance) {})
		for i := range 10 {
			mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		for i := range 10 {
			v, _ := calls.Load(fmt.Sprint("svc", i))
			if n := v.(*atomic.Int64).Load(); n < 10 {
				t.Errorf("svc%d made %d attempts in 10 minutes while another attempt was blocked, want >= 10", i, n)
			}
		}
		close(release)
	})
}

// An attempt queued behind one that blocks runs within about TimerSlack,
// even when nothing else is due.
func TestAttemptQueuedBehindABlockedOneRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		release := make(chan struct{})
		var slowCalls, otherCalls atomic.Int64
		reg.SetFailure(func(k subscriber.Key) error {
			if k.Service == "slow" {
				if slowCalls.Add(1) == 2 {
					<-release // its first retry blocks
				}
			} else {
				otherCalls.Add(1)
			}
			return errors.New("server error")
		})
		m := newManager(t, reg, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Minute, Jitter: rebound.NoJitter}))
		mustSubscribe(t, m, subscriber.Key{Service: "slow"}, func([]subscriber.Instance) {})
		synctest.Wait() // slow's retry is queued first
		mustSubscribe(t, m, subscriber.Key{Service: "other"}, func([]subscriber.Instance) {})
		// Both retry at 1 s, in the same batch, slow first; it blocks.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if slowCalls.Load() != 2 || otherCalls.Load() != 2 {
			t.Fatalf("attempts slow %d, other %d at 1.5 s; want 2 and 2", slowCalls.Load(), otherCalls.Load())
		}
		close(release)
	})
}
