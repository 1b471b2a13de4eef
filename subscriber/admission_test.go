package subscriber_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A Subscribe's first attempt takes no limiter token, however few there
// are; the first attempt of a later run does, even when the subscription
// is still in its first run (disrupted while it waits to retry).
func TestFirstAttemptsTakeNoTokenLaterRunsDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		reg := subscribertest.New()
		reg.SetDown(true)
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(1, 1)),
			subscriber.WithPolicy(rebound.Policy{Initial: time.Hour, Max: time.Hour, Jitter: rebound.NoJitter}))
		subs := subscribeN(t, m, n)
		synctest.Wait()
		for _, s := range subs {
			if st := s.Status(); st.TotalAttempts != 1 {
				t.Fatalf("%v: %d attempts at once, want 1 each (no token for a first attempt)", st.Key, st.TotalAttempts)
			}
		}

		// The registry returns (Connected) while every subscription waits
		// an hour for its retry: each starts a new run at once, through
		// the limiter (1 per second, burst 1).
		var mu sync.Mutex
		var at []time.Duration
		up := time.Now()
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Since(up))
			mu.Unlock()
		})
		reg.SetDown(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(at) != n {
			t.Fatalf("%d attempts after the registry came back, want %d", len(at), n)
		}
		for i, d := range at {
			if min := time.Duration(i-1) * time.Second; d < min {
				t.Fatalf("attempt %d after the return at %v, the limiter allows it at %v at the earliest (%v)", i+1, d, min, at)
			}
		}
		for _, s := range subs {
			if st := s.Status(); st.State != subscriber.StateSubscribed {
				t.Fatalf("%v: %v, want subscribed", st.Key, st.State)
			}
		}
	})
}

// A Subscribe's first attempt is sent at once even when the limiter has
// no token left.
func TestSubscribeIsNotPacedByTheLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		m := newManager(t, subscribertest.New(), subscriber.WithLimiter(rate.NewLimiter(1, 1)))
		start := time.Now()
		for i := range n {
			s := mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
			<-s.Ready()
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%d subscriptions acknowledged after %v, want at once", n, d)
		}
	})
}

// WithPolicy's rebound options reach the subscriptions' loops: its limiter
// replaces the default one (not the reverse), options of two WithPolicy
// add up, and a bad one is an *rebound.ArgumentError naming WithPolicy.
func TestWithPolicyOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
		p := rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: rebound.NoJitter}
		slow := rate.NewLimiter(rate.Every(time.Hour), 1) // one token, the next in an hour
		m := newManager(t, reg, subscriber.WithPolicy(p, rebound.WithLimiter(slow)),
			subscriber.WithPolicy(p, rebound.WithBudget(mustBudget(t))))
		s, err := m.Subscribe(t.Context(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// The first attempt takes no token, the first retry the only one.
		if st := s.Status(); st.TotalAttempts != 2 {
			t.Fatalf("%d attempts in a minute with a limiter of one token per hour, want 2", st.TotalAttempts)
		}
	})
	var zero rebound.RetryBudget
	_, err := subscriber.New(subscribertest.New(), subscriber.WithPolicy(rebound.Policy{}, rebound.WithBudget(&zero)))
	var ae *rebound.ArgumentError
	if !errors.As(err, &ae) || ae.Func != "subscriber.WithPolicy" || ae.Arg != "opts" {
		t.Fatalf("New with a zero RetryBudget in WithPolicy: %v, want an ArgumentError of subscriber.WithPolicy", err)
	}
}

func mustBudget(t *testing.T) *rebound.RetryBudget {
	b, err := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Limits given to WithPolicy do not apply: a subscription never gives up on
// a transient error, whatever WithMaxAttempts or WithMaxElapsed say.
func TestWithPolicyLimitsDoNotStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
		p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
		m := newManager(t, reg, subscriber.WithPolicy(p, rebound.WithMaxAttempts(2), rebound.WithMaxElapsed(time.Second)))
		s, err := m.Subscribe(t.Context(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := s.Status(); st.State == subscriber.StateStopped || st.TotalAttempts < 10 {
			t.Fatalf("after a minute of failures with WithMaxAttempts(2): state %v, %d attempts; want it still retrying", st.State, st.TotalAttempts)
		}
	})
}
