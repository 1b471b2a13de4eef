package subscriber_test

import (
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
