package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a listener that records every call.
type recorder struct {
	mu    sync.Mutex
	calls [][]subscriber.Instance
	times []time.Time
}

func (r *recorder) listen(list []subscriber.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, list)
	r.times = append(r.times, time.Now())
}

func (r *recorder) get() [][]subscriber.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) ips() [][]string {
	var out [][]string
	for _, list := range r.get() {
		ips := []string{}
		for _, in := range list {
			ips = append(ips, in.IP)
		}
		out = append(out, ips)
	}
	return out
}

func inst(ip string) subscriber.Instance {
	return subscriber.Instance{IP: ip, Port: 8080, Weight: 1, Healthy: true, Enabled: true, Ephemeral: true}
}

func newManager(t *testing.T, reg subscriber.Registry, opts ...subscriber.Option) *subscriber.Manager {
	t.Helper()
	opts = append([]subscriber.Option{subscriber.WithLogger(zaptest.NewLogger(t))}, opts...)
	m, err := subscriber.New(reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func mustSubscribe(t *testing.T, m *subscriber.Manager, key subscriber.Key, l func([]subscriber.Instance)) *subscriber.Subscription {
	t.Helper()
	s, err := m.Subscribe(context.Background(), key, l)
	if err != nil {
		t.Fatalf("Subscribe(%v): %v", key, err)
	}
	return s
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// plain hides the ConnectionMonitor of a subscribertest.Registry.
type plain struct{ r *subscribertest.Registry }

func (p plain) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	return p.r.Subscribe(ctx, k, s)
}

func (p plain) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	return p.r.Unsubscribe(ctx, k, s)
}

var orders = subscriber.Key{Service: "orders"}

func TestNewRejectsBadArguments(t *testing.T) {
	reg := subscribertest.New()
	tests := []struct {
		name string
		reg  subscriber.Registry
		opt  subscriber.Option
		arg  string
	}{
		{"nil registry", nil, nil, "reg"},
		{"invalid policy", reg, subscriber.WithPolicy(rebound.Policy{Multiplier: 0.5}), "p"},
		{"negative hold", reg, subscriber.WithEmptyListHold(-time.Second), "d"},
		{"zero burst", reg, subscriber.WithLimiter(rate.NewLimiter(1, 0)), "l"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := subscriber.New(tt.reg, tt.opt)
			if err == nil {
				m.Close()
				t.Fatal("New succeeded, want an error")
			}
			var ae *rebound.ArgumentError
			if !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != tt.arg {
				t.Fatalf("New: %v; want an *ArgumentError for %q wrapping ErrInvalidArgument", err, tt.arg)
			}
		})
	}
	// Valid options, including a nil limiter and a nil option, are accepted.
	m, err := subscriber.New(reg, nil, subscriber.WithLimiter(nil), subscriber.WithEmptyListHold(0),
		subscriber.WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: time.Second}))
	if err != nil {
		t.Fatalf("New with valid options: %v", err)
	}
	m.Close()
}

func TestSubscribeValidatesArguments(t *testing.T) {
	reg := subscribertest.New()
	m := newManager(t, reg)
	l := func([]subscriber.Instance) {}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		key  subscriber.Key
		l    func([]subscriber.Instance)
		arg  string // "" means not an ArgumentError
		is   error
	}{
		{"nil ctx", nil, orders, l, "ctx", rebound.ErrInvalidArgument},
		{"empty service", context.Background(), subscriber.Key{Group: "g"}, l, "key.Service", rebound.ErrInvalidArgument},
		{"empty cluster", context.Background(), subscriber.Key{Service: "s", Clusters: []string{"a", ""}}, l, "key.Clusters[1]", rebound.ErrInvalidArgument},
		{"nil listener", context.Background(), orders, nil, "l", rebound.ErrInvalidArgument},
		{"done ctx", cancelled, orders, l, "", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := m.Subscribe(tt.ctx, tt.key, tt.l)
			if err == nil || s != nil {
				t.Fatalf("Subscribe = %v, %v; want an error", s, err)
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("Subscribe: %v; want errors.Is %v", err, tt.is)
			}
			var ae *rebound.ArgumentError
			if tt.arg != "" && (!errors.As(err, &ae) || ae.Arg != tt.arg) {
				t.Fatalf("Subscribe: %v; want an *ArgumentError naming %q", err, tt.arg)
			}
		})
	}
	if st := reg.Stats(); st.Subscribes != 0 {
		t.Fatalf("registry saw %d Subscribe calls for invalid arguments", st.Subscribes)
	}
	m.Close()
	if _, err := m.Subscribe(context.Background(), orders, l); !errors.Is(err, subscriber.ErrManagerClosed) {
		t.Fatalf("Subscribe after Close: %v; want ErrManagerClosed", err)
	}
}

func TestRetryScheduleFollowsPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetDown(true)
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
		})
		m := newManager(t, plain{reg}, subscriber.WithPolicy(rebound.Policy{
			Initial: time.Second, Max: 8 * time.Second, Jitter: rebound.NoJitter}))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(32 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(at)
		mu.Unlock()
		// Waits of 1, 2, 4, 8, 8, 8 s, each fired on the scheduler's grid:
		// at most 1/16 of the wait (and MaxTimerSlack) late.
		waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		if len(got) != len(waits)+1 || got[0] != 0 {
			t.Fatalf("attempt times %v, want 7 attempts after waits of %v", got, waits)
		}
		for i, w := range waits {
			if gap := got[i+1] - got[i]; gap < w || gap > w+min(w/16, subscriber.MaxTimerSlack) {
				t.Fatalf("attempt times %v: wait %d is %v, want %v (plus the timer slack)", got, i, gap, w)
			}
		}
		st := s.Status()
		if st.State != subscriber.StateRetrying || st.Attempts != 7 || !errors.Is(st.LastErr, subscribertest.ErrUnavailable) {
			t.Fatalf("status %+v; want retrying, 7 attempts, ErrUnavailable", st)
		}
		if isClosed(s.Ready()) {
			t.Fatal("Ready closed while the registry is down")
		}
	})
}

func TestRetryDelaysGrowWithJitterAndNeverSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetDown(true)
		var mu sync.Mutex
		var at []time.Time
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
		p := rebound.Policy{Jitter: rebound.EqualJitter} // 1s doubling to 30s, delay in [c/2, c]
		m := newManager(t, plain{reg}, subscriber.WithPolicy(p))
		mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// Lower bounds of the delays 0.5,1,2,4,8,15,15... allow at most 44
		// attempts in 10 minutes; upper bounds 1,2,4,8,16,30,30... force at
		// least 24.
		if n := len(at); n < 24 || n > 44 {
			t.Fatalf("%d attempts in 10 minutes; the policy allows 24..44", n)
		}
		q := p
		q.Jitter = rebound.NoJitter // its delays are p's ceilings
		ceilings := q.NewBackOff()
		for i := 1; i < len(at); i++ {
			gap, c := at[i].Sub(at[i-1]), ceilings.NextBackOff()
			if gap < c/2 || gap > c+subscriber.MaxTimerSlack {
				t.Fatalf("gap %d = %v, want within [%v, %v] (give or take the timer slack)", i, gap, c/2, c)
			}
		}
	})
}

func TestReadyAfterRegistryComesUp(t *testing.T) {
	for _, monitored := range []bool{true, false} {
		t.Run(fmt.Sprintf("monitor=%v", monitored), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				reg.SetDown(true)
				reg.Set(orders, inst("10.0.0.1"))
				var r subscriber.Registry = reg
				if !monitored {
					r = plain{reg}
				}
				p := rebound.Policy{Initial: time.Second, Max: 10 * time.Second}
				m := newManager(t, r, subscriber.WithPolicy(p))
				var rec recorder
				s := mustSubscribe(t, m, orders, rec.listen)
				time.Sleep(time.Minute)
				if isClosed(s.Ready()) || len(rec.get()) != 0 {
					t.Fatal("ready or delivered while the registry is down")
				}
				up := time.Now()
				reg.SetDown(false)
				<-s.Ready()
				waited := time.Since(up)
				// Without a monitor the loop finds out at its next attempt:
				// within the policy's Max, give or take the scheduler's
				// timer slack (a delay drawn near Max came 10.08 s later in
				// 3 of 4,500 runs). With one, at once.
				bound := p.Max + subscriber.MaxTimerSlack
				if monitored {
					bound = 0
				}
				if waited > bound {
					t.Fatalf("Ready %v after the registry came up; want <= %v", waited, bound)
				}
				synctest.Wait()
				if got := rec.ips(); !slices.Equal(got[0], []string{"10.0.0.1"}) || len(got) != 1 {
					t.Fatalf("listener got %v, want one call with 10.0.0.1", got)
				}
				if st := s.Status(); st.State != subscriber.StateSubscribed || st.LastErr != nil || st.Instances != 1 {
					t.Fatalf("status %+v", st)
				}
			})
		})
	}
}

func TestPermanentErrorsStopTheLoop(t *testing.T) {
	errBadKey := errors.New("key not allowed")
	tests := []struct {
		name  string
		setup func(*subscribertest.Registry)
		is    error
	}{
		{"registry closed", func(r *subscribertest.Registry) { r.Close() }, rebound.ErrClosed},
		{"rebound.Permanent", func(r *subscribertest.Registry) {
			r.SetFailure(func(subscriber.Key) error { return rebound.Permanent(errBadKey) })
		}, errBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				tt.setup(reg)
				m := newManager(t, reg)
				s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
				<-s.Done()
				if !errors.Is(s.Err(), tt.is) {
					t.Fatalf("Err = %v, want %v", s.Err(), tt.is)
				}
				if st := s.Status(); st.State != subscriber.StateStopped || st.TotalAttempts != 1 {
					t.Fatalf("status %+v; want stopped after 1 attempt", st)
				}
				if st := reg.Stats(); st.Subscribes != 1 || st.Unsubscribes != 1 {
					t.Fatalf("registry stats %+v; want 1 subscribe, 1 unsubscribe", st)
				}
				// A stopped subscription stays visible, with its reason.
				if all := m.Status(); len(all) != 1 || all[0].State != subscriber.StateStopped || !errors.Is(all[0].LastErr, tt.is) {
					t.Fatalf("Manager.Status = %+v, want the stopped subscription with its reason", all)
				}
				if c := m.Counts(); c.ByState[subscriber.StateStopped] != 1 || c.Stopped != 1 {
					t.Fatalf("Counts %+v, want 1 stopped", c)
				}
			})
		})
	}
}

func TestTransientErrorsNeverStopTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		errs := []error{context.DeadlineExceeded, errors.New("server error 500"), subscribertest.ErrUnavailable}
		var n atomic.Int64
		reg.SetFailure(func(subscriber.Key) error { return errs[int(n.Add(1))%len(errs)] })
		m := newManager(t, reg)
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(time.Hour)
		synctest.Wait()
		st := s.Status()
		if st.State != subscriber.StateRetrying || st.Attempts < 100 || s.Err() != nil {
			t.Fatalf("after an hour of transient errors: %+v, Err %v; want still retrying, >= 100 attempts", st, s.Err())
		}
		reg.SetFailure(nil)
		time.Sleep(30 * time.Second)
		<-s.Ready()
	})
}

// flaky fails the first n attempts, and like the Nacos client delivers the
// current list on each of them anyway.
type flaky struct {
	*subscribertest.Registry
	n     int
	calls atomic.Int64
	list  []subscriber.Instance
}

func (f *flaky) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	if c := f.calls.Add(1); int(c) <= f.n {
		s.Update(slices.Clone(f.list))
		return errors.New("client not connected")
	}
	return f.Registry.Subscribe(ctx, k, s)
}

func TestExactlyOnceAfterManyFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		f := &flaky{Registry: reg, n: 40, list: []subscriber.Instance{inst("10.0.0.1")}}
		m := newManager(t, f, subscriber.WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: 10 * time.Millisecond}))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		if got := f.calls.Load(); got != 41 {
			t.Fatalf("%d attempts, want 41", got)
		}
		reg.Set(orders, inst("10.0.0.1"), inst("10.0.0.2"))
		synctest.Wait()
		reg.Set(orders, inst("10.0.0.2"))
		synctest.Wait()
		want := [][]string{{"10.0.0.1"}, {"10.0.0.1", "10.0.0.2"}, {"10.0.0.2"}}
		if got := rec.ips(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("listener calls %v, want %v", got, want)
		}
		if st := reg.Stats(); st.Active != 1 {
			t.Fatalf("registry holds %d sinks, want 1", st.Active)
		}
	})
}

func TestReconnectConfirmsEverySubscriptionThroughTheLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit, burst = 100, 20, 5
		reg := subscribertest.New()
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			subs[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
		}
		for _, s := range subs {
			<-s.Ready()
		}
		time.Sleep(time.Minute) // refill the limiter
		var mu sync.Mutex
		var at []time.Time
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
		restart := time.Now()
		reg.Restart() // forgets every subscription; Disconnected, Connected
		if st := reg.Stats(); st.Active != 0 {
			t.Fatalf("active after restart = %d", st.Active)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := reg.Stats(); st.Active != n {
			t.Fatalf("%d of %d subscriptions confirmed after the restart", st.Active, n)
		}
		for _, st := range m.Status() {
			if st.State != subscriber.StateSubscribed {
				t.Fatalf("status %+v, want subscribed", st)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(at) < n {
			t.Fatalf("%d confirmations, want >= %d", len(at), n)
		}
		// Paced by the limiter: at most burst+limit per second, and n
		// confirmations take at least (n-burst)/limit.
		for i := range at {
			j := i
			for j < len(at) && at[j].Sub(at[i]) < time.Second {
				j++
			}
			if j-i > burst+limit {
				t.Fatalf("%d subscribe requests within 1s of %v, limiter allows %d", j-i, at[i].Sub(restart), burst+limit)
			}
		}
		if d, min := at[len(at)-1].Sub(restart), time.Duration(n-burst)*time.Second/limit; d < min {
			t.Fatalf("all confirmed within %v, faster than the limiter allows (%v)", d, min)
		}
	})
}

func TestResubscribeFromAdapter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg)
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		reg.SetFailure(func(subscriber.Key) error { return errors.New("compacted") })
		reg.Break(orders)
		time.Sleep(time.Second)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateRetrying || st.LastErr == nil {
			t.Fatalf("status after Break with failing registry: %+v", st)
		}
		reg.SetFailure(nil)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateSubscribed || reg.Subscribed(orders) != 1 {
			t.Fatalf("status %+v, registered %d; want subscribed again", st, reg.Subscribed(orders))
		}
		reg.Set(orders, inst("10.0.0.2"))
		synctest.Wait()
		if got, want := rec.ips(), [][]string{{"10.0.0.1"}, {"10.0.0.2"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("listener calls %v, want %v", got, want)
		}
	})
}

func TestDisconnectKeepsLastList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg)
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		reg.SetDown(true)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		st := s.Status()
		if st.State != subscriber.StateRetrying || st.Instances != 1 || len(rec.get()) != 1 {
			t.Fatalf("during the outage: %+v, %d calls", st, len(rec.get()))
		}
		if !errors.Is(st.LastErr, subscribertest.ErrUnavailable) && !errors.Is(st.LastErr, subscriber.ErrDisconnected) {
			t.Fatalf("LastErr %v", st.LastErr)
		}
		reg.SetDown(false)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateSubscribed {
			t.Fatalf("after the outage: %+v", st)
		}
	})
}

func TestEmptyListHold(t *testing.T) {
	const hold = 30 * time.Second
	t.Run("replaced by re-registration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := subscribertest.New()
			reg.Set(orders, inst("10.0.0.1"))
			m := newManager(t, reg, subscriber.WithEmptyListHold(hold))
			var rec recorder
			s := heldAfterRestart(t, reg, m, &rec)
			// Confirmed, and the empty list of the restarted registry is
			// held, visibly.
			if st := s.Status(); st.State != subscriber.StateHeld || reg.Subscribed(orders) != 1 ||
				st.HeldSince.IsZero() || st.HeldReason == "" || st.HeldUntil.Sub(st.HeldSince) != hold {
				t.Fatalf("not confirmed and held after restart: %+v", st)
			}
			time.Sleep(hold / 2)
			reg.Set(orders, inst("10.0.0.2")) // the provider re-registers
			time.Sleep(time.Minute)
			synctest.Wait()
			if got, want := rec.ips(), [][]string{{"10.0.0.1"}, {"10.0.0.2"}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("listener calls %v, want %v (no empty list)", got, want)
			}
		})
	})
	t.Run("confirmed empty after the hold", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := subscribertest.New()
			reg.Set(orders, inst("10.0.0.1"))
			m := newManager(t, reg, subscriber.WithEmptyListHold(hold))
			var rec recorder
			heldAfterRestart(t, reg, m, &rec)
			confirmed := time.Now()
			time.Sleep(time.Minute)
			synctest.Wait()
			got := rec.ips()
			if want := [][]string{{"10.0.0.1"}, {}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("listener calls %v, want %v", got, want)
			}
			rec.mu.Lock()
			at := rec.times[1].Sub(confirmed)
			rec.mu.Unlock()
			if at < hold || at > hold+subscriber.MaxTimerSlack {
				t.Fatalf("empty list delivered %v after the confirmation, want %v (plus the timer slack)", at, hold)
			}
		})
	})
	t.Run("held while disconnected", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := subscribertest.New()
			reg.Set(orders, inst("10.0.0.1"))
			m := newManager(t, reg, subscriber.WithEmptyListHold(hold))
			var rec recorder
			s := mustSubscribe(t, m, orders, rec.listen)
			<-s.Ready()
			synctest.Wait()
			reg.SetDown(true)
			synctest.Wait()
			// A sink may still get an empty list from a half-connected client.
			reg.SetFailure(func(subscriber.Key) error { return errors.New("server error") })
			reg.SetDown(false)
			reg.Set(orders) // pushed to the still registered sink, while unconfirmed
			arrived := time.Now()
			time.Sleep(hold - time.Second)
			synctest.Wait()
			if got := rec.ips(); len(got) != 1 {
				t.Fatalf("listener calls %v while unconfirmed, want only the first list", got)
			}
			if st := s.Status(); st.State != subscriber.StateRetrying || !st.HeldSince.Equal(arrived) {
				t.Fatalf("status while held %+v", st)
			}
			if n := reg.Stats().Lookups; n != 0 {
				t.Fatalf("%d lookups while unconfirmed: a hold is checked only while subscribed", n)
			}
			// The hold has a hard cap: hold after the empty list arrived,
			// confirmed or not.
			time.Sleep(time.Minute)
			synctest.Wait()
			if got, want := rec.ips(), [][]string{{"10.0.0.1"}, {}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("listener calls %v, want %v", got, want)
			}
			rec.mu.Lock()
			at := rec.times[1].Sub(arrived)
			rec.mu.Unlock()
			if at < hold || at > hold+subscriber.MaxTimerSlack {
				t.Fatalf("empty list delivered %v after it arrived, want the cap %v (plus the timer slack)", at, hold)
			}
			if st := s.Status(); !st.HeldSince.IsZero() {
				t.Fatalf("status after the cap %+v, want nothing held", st)
			}
			reg.SetFailure(nil)
		})
	})
	t.Run("outside churn or disabled: at once", func(t *testing.T) {
		for _, h := range []time.Duration{0, hold} {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				reg.Set(orders, inst("10.0.0.1"))
				m := newManager(t, reg, subscriber.WithEmptyListHold(h))
				var rec recorder
				s := mustSubscribe(t, m, orders, rec.listen)
				<-s.Ready()
				synctest.Wait()
				if h == 0 {
					reg.Restart()
					synctest.Wait()
				}
				reg.Set(orders)
				synctest.Wait()
				if got, want := rec.ips(), [][]string{{"10.0.0.1"}, {}}; !slices.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("hold %v: listener calls %v, want %v", h, got, want)
				}
			})
		}
	})
}

func TestPanickingListenerIsIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
		reg := subscribertest.New()
		m := newManager(t, reg, subscriber.WithLogger(log))
		var panics atomic.Int64
		bad := subscriber.Key{Service: "bad"}
		mustSubscribe(t, m, bad, func([]subscriber.Instance) {
			panics.Add(1)
			panic("listener bug")
		})
		var rec recorder
		good := mustSubscribe(t, m, orders, rec.listen)
		synctest.Wait()
		for i := range 3 {
			ip := fmt.Sprint("10.0.0.", i+1)
			reg.Set(bad, inst(ip))
			reg.Set(orders, inst(ip))
			synctest.Wait()
		}
		if got := panics.Load(); got != 4 { // initial empty list + 3 changes
			t.Fatalf("panicking listener called %d times, want 4", got)
		}
		if got := len(rec.get()); got != 4 {
			t.Fatalf("good listener called %d times, want 4", got)
		}
		if n := logs.FilterMessage("listener panicked").Len(); n != 4 {
			t.Fatalf("%d 'listener panicked' log lines, want 4", n)
		}
		if st := good.Status(); st.State != subscriber.StateSubscribed {
			t.Fatalf("good subscription: %+v", st)
		}
	})
}

func TestSlowListenerDoesNotBlockOthersAndCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		slow := subscriber.Key{Service: "slow"}
		reg.Set(slow, inst("10.0.0.1"))
		m := newManager(t, reg)
		gate := make(chan struct{})
		var slowRec recorder
		mustSubscribe(t, m, slow, func(l []subscriber.Instance) {
			slowRec.listen(l)
			if len(slowRec.get()) == 1 {
				<-gate
			}
		})
		var rec recorder
		mustSubscribe(t, m, orders, rec.listen)
		synctest.Wait() // the slow listener is blocked in its first call
		for i := 2; i <= 5; i++ {
			reg.Set(slow, inst(fmt.Sprint("10.0.0.", i)))
			reg.Set(orders, inst(fmt.Sprint("10.0.0.", i)))
			synctest.Wait()
		}
		if got := len(rec.get()); got != 5 {
			t.Fatalf("other listener got %d calls while one listener was blocked, want 5", got)
		}
		close(gate)
		synctest.Wait()
		if got, want := slowRec.ips(), [][]string{{"10.0.0.1"}, {"10.0.0.5"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("slow listener calls %v, want %v (burst coalesced into the latest)", got, want)
		}
	})
}

func TestStatusStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		release := make(chan error)
		reg.SetFailure(func(subscriber.Key) error { return <-release })
		m := newManager(t, reg)
		t0 := time.Now()
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		synctest.Wait()
		st := s.Status()
		if st.State != subscriber.StatePending || st.Attempts != 1 || st.LastErr != nil || !st.Since.Equal(t0) {
			t.Fatalf("while the first attempt is in flight: %+v", st)
		}
		time.Sleep(time.Second)
		errBoom := errors.New("boom")
		release <- errBoom
		synctest.Wait()
		st = s.Status()
		if st.State != subscriber.StateRetrying || !errors.Is(st.LastErr, errBoom) || st.Since.Sub(t0) != time.Second {
			t.Fatalf("after a failure: %+v", st)
		}
		go func() { release <- nil }()
		time.Sleep(time.Second)
		synctest.Wait()
		st = s.Status()
		if st.State != subscriber.StateSubscribed || st.Attempts != 2 || st.TotalAttempts != 2 || st.LastErr != nil {
			t.Fatalf("after success: %+v", st)
		}
		if all := m.Status(); len(all) != 1 || all[0].Key.String() != orders.String() {
			t.Fatalf("Manager.Status = %+v", all)
		}
		if err := s.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		st = s.Status()
		if st.State != subscriber.StateStopped || !errors.Is(st.LastErr, subscriber.ErrUnsubscribed) {
			t.Fatalf("after Unsubscribe: %+v", st)
		}
		if all := m.Status(); len(all) != 1 || all[0].State != subscriber.StateStopped {
			t.Fatalf("Manager.Status after Unsubscribe = %+v, want it stopped", all)
		}
	})
}

func TestUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m := newManager(t, reg)
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		if err := s.Unsubscribe(); err != nil {
			t.Fatalf("Unsubscribe: %v", err)
		}
		if !isClosed(s.Done()) || !errors.Is(s.Err(), subscriber.ErrUnsubscribed) {
			t.Fatalf("after Unsubscribe: done %v, err %v", isClosed(s.Done()), s.Err())
		}
		reg.Set(orders, inst("10.0.0.1"))
		synctest.Wait()
		if got := len(rec.get()); got != 1 {
			t.Fatalf("listener called %d times, want 1 (nothing after Unsubscribe)", got)
		}
		if err := s.Unsubscribe(); err != nil {
			t.Fatalf("second Unsubscribe: %v", err)
		}
		if st := reg.Stats(); st.Unsubscribes != 1 || st.Active != 0 {
			t.Fatalf("registry %+v; want exactly one Unsubscribe", st)
		}
	})
}

func TestUnsubscribeFromListenerAndDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m := newManager(t, reg)
		var self atomic.Pointer[subscriber.Subscription]
		unsubscribed := make(chan error, 1)
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {
			for self.Load() == nil {
				time.Sleep(time.Millisecond)
			}
			unsubscribed <- self.Load().Unsubscribe()
		})
		self.Store(s)
		if err := <-unsubscribed; err != nil {
			t.Fatalf("Unsubscribe from the listener: %v", err)
		}
		<-s.Done()

		reg.SetDown(true)
		s2 := mustSubscribe(t, m, subscriber.Key{Service: "other"}, func([]subscriber.Instance) {})
		time.Sleep(10 * time.Minute)
		if err := s2.Unsubscribe(); err != nil {
			t.Fatalf("Unsubscribe during an outage: %v", err)
		}
	})
}

func TestSubscribeContextBoundsLife(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m := newManager(t, reg)
		ctx, cancel := context.WithCancel(context.Background())
		s, err := m.Subscribe(ctx, orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Ready()
		cancel()
		<-s.Done()
		if !errors.Is(s.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", s.Err())
		}
		if st := reg.Stats(); st.Unsubscribes != 1 {
			t.Fatalf("registry %+v, want 1 Unsubscribe", st)
		}

		// A deadline stops a retrying subscription too.
		reg.SetDown(true)
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err = m.Subscribe(ctx, orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Done()
		if !errors.Is(s.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want context.DeadlineExceeded", s.Err())
		}
	})
}

// blockingUnsub blocks in Unsubscribe until released.
type blockingUnsub struct {
	*subscribertest.Registry
	release chan struct{}
}

func (b *blockingUnsub) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Registry.Unsubscribe(ctx, k, s)
}

func TestCloseIsIdempotentBoundedAndStopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		b := &blockingUnsub{Registry: reg, release: make(chan struct{})}
		m, err := subscriber.New(b, subscriber.WithLogger(zaptest.NewLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		var subs []*subscriber.Subscription
		for i := range 20 {
			s := mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
			subs = append(subs, s)
		}
		reg.SetDown(true) // half of them will be retrying
		for i := range 10 {
			mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("down", i)}, func([]subscriber.Instance) {})
		}
		time.Sleep(time.Minute)

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown with a stuck registry: %v, want DeadlineExceeded", err)
		}
		close(b.release)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := m.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		wg.Wait()
		if err := m.Close(); err != nil {
			t.Fatalf("Close again: %v", err)
		}
		for _, s := range subs {
			if !isClosed(s.Done()) || !errors.Is(s.Err(), subscriber.ErrManagerClosed) {
				t.Fatalf("after Close: done %v, Err %v", isClosed(s.Done()), s.Err())
			}
		}
		if st := reg.Stats(); st.Unsubscribes != 30 {
			t.Fatalf("registry %+v, want 30 Unsubscribes", st)
		}
		if _, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {}); !errors.Is(err, subscriber.ErrManagerClosed) {
			t.Fatalf("Subscribe after Close: %v", err)
		}
		// synctest.Test fails if any goroutine of the bubble is left.
	})
}

func TestCloseLeavesNoGoroutineRealTime(t *testing.T) {
	defer goleak.VerifyNone(t)
	reg := subscribertest.New()
	m, err := subscriber.New(reg, subscriber.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
	<-s.Ready()
	reg.SetDown(true)
	mustSubscribe(t, m, subscriber.Key{Service: "down"}, func([]subscriber.Instance) {})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFailingSubscriptionLogsAHandfulOfLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		reg := subscribertest.New()
		reg.SetDown(true)
		m := newManager(t, plain{reg}, subscriber.WithLogger(zap.New(core)))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := logs.Len(); n < 1 || n > 10 {
			t.Fatalf("%d log lines for an hour of failures (%d attempts), want a handful", n, s.Status().TotalAttempts)
		}
		if logs.FilterMessage("retry loop failing").Len() != 1 {
			t.Fatalf("want one %q line, got %v", "retry loop failing", logs.All())
		}
		reg.SetDown(false)
		time.Sleep(30 * time.Second)
		<-s.Ready()
		if logs.FilterMessage("retry loop recovered").Len() != 1 {
			t.Fatalf("want one %q line", "retry loop recovered")
		}
	})
}
