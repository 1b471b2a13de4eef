package subscriber_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// checkRate fails if the request times in at (sorted) exceed what a
// token bucket of limit per second and burst allows in any window.
func checkRate(t *testing.T, at []time.Time, limit, burst int) {
	t.Helper()
	for i := range at {
		for j := i; j < len(at); j++ {
			w := at[j].Sub(at[i])
			if allowed := burst + int(math.Floor(w.Seconds()*float64(limit)+1e-6)); j-i+1 > allowed {
				t.Fatalf("%d requests within %v (from request %d at %v, previous at %v), a limiter of %d/s burst %d allows %d", j-i+1, w, i, at[i].Sub(at[0]), at[max(i-1, 0)].Sub(at[0]), limit, burst, allowed)
			}
			if w > 3*time.Second {
				break
			}
		}
	}
}

// Thousands of subscriptions created while the registry is down share the
// limiter: their retries never exceed its rate, and once the registry is
// back every one of them is acknowledged within N/limit+1 s.
func TestBreakStormPacedAndAckedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit, burst = 2000, 500, 50
		reg := subscribertest.New()
		reg.SetDown(true)
		var mu sync.Mutex
		var at []time.Time
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			subs[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
		}
		synctest.Wait()
		mu.Lock()
		first := len(at)
		at = at[:0] // the first attempts take no token
		mu.Unlock()
		if first != n {
			t.Fatalf("%d first attempts, want %d", first, n)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		back := time.Now()
		reg.SetDown(false)
		var last time.Time
		for _, s := range subs {
			<-s.Ready()
		}
		last = time.Now()
		synctest.Wait()
		if d, max := last.Sub(back), time.Duration(n/limit+1)*time.Second; d > max {
			t.Errorf("every subscription acknowledged %v after the registry came back, want <= %v", d, max)
		}
		mu.Lock()
		checkRate(t, at, limit, burst)
		total := first + len(at)
		mu.Unlock()
		sum := 0
		for _, st := range m.Status() {
			if st.State != subscriber.StateSubscribed && st.State != subscriber.StateHeld { // held: an empty first list after the reconnect
				t.Fatalf("status %+v", st)
			}
			sum += st.TotalAttempts
		}
		if sum != total || reg.Stats().Subscribes != total {
			t.Fatalf("sum of TotalAttempts %d, registry saw %d, recorded %d", sum, reg.Stats().Subscribes, total)
		}
	})
}

// lookupTimes is a Registry whose Lookups are recorded.
type lookupTimes struct {
	*subscribertest.Registry
	mu sync.Mutex
	at []time.Time
}

func (r *lookupTimes) Lookup(ctx context.Context, key subscriber.Key) ([]subscriber.Instance, error) {
	r.mu.Lock()
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	return r.Registry.Lookup(ctx, key)
}

// Refresh Lookups of thousands of subscriptions at once share the limiter
// and never exceed its rate.
func TestBreakRefreshLookupsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit, burst = 2000, 500, 50
		reg := &lookupTimes{Registry: subscribertest.New()}
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			k := subscriber.Key{Service: fmt.Sprint("svc", i)}
			reg.Set(k, inst("10.0.0.1"))
			subs[i] = mustSubscribe(t, m, k, func([]subscriber.Instance) {})
		}
		for _, s := range subs {
			<-s.Ready()
		}
		time.Sleep(time.Minute) // refill the limiter
		for _, s := range subs {
			s.Refresh()
		}
		time.Sleep(time.Duration(n/limit+2) * time.Second)
		synctest.Wait()
		reg.mu.Lock()
		defer reg.mu.Unlock()
		if len(reg.at) != n {
			t.Fatalf("%d lookups, want %d", len(reg.at), n)
		}
		checkRate(t, reg.at, limit, burst)
	})
}

// Subscriptions whose first attempt is in flight when the connection comes
// back start a new run when it ends: its first attempt takes a limiter
// token, like that of any later run; it did not (the engine was asked
// Ready again for the attempt it had already admitted, without a token).
func TestBreakAttemptAfterAReconnectInFlightTakesAToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		reg := subscribertest.New()
		release := make(chan struct{})
		reg.SetFailure(func(subscriber.Key) error {
			<-release
			return errRejected
		})
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(1, 1)))
		subs := subscribeN(t, m, n)
		synctest.Wait() // n first attempts block in the registry
		reg.SetDown(true)
		reg.SetDown(false) // Disconnected, Connected: each attempt in flight is cancelled
		synctest.Wait()
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		reg.SetFailure(nil)
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
		})
		close(release)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(at) != n {
			t.Fatalf("%d attempts after the reconnect, want %d", len(at), n)
		}
		for i, d := range at {
			if min := time.Duration(i-1) * time.Second; d < min {
				t.Fatalf("attempt %d after the reconnect at %v, the limiter allows it at %v at the earliest (%v)", i+1, d, min, at)
			}
		}
		for _, s := range subs {
			if st := s.Status(); st.State != subscriber.StateSubscribed {
				t.Fatalf("%v: %v, want subscribed", st.Key, st.State)
			}
		}
	})
}
