package subscriber_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakWithPolicyObserverCallsClose: WithPolicy passes every engine
// option on, so a rebound.WithObserver given there (its doc lists only the
// limiter, the budget and the throttle) observes the engine's events of
// every subscription, on the Manager's own goroutines. Such an observer
// that calls Manager.Close waits for the goroutine calling it: Close never
// returns. Correct: WithPolicy refuses an option it does not apply (an
// *rebound.ArgumentError), or Close from any observer returns
// rebound.ErrCalledFromCallback as the docs promise for WithObserver's.
func TestBreakWithPolicyObserverCallsClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
		var m *subscriber.Manager
		closed := make(chan error, 1)
		obs := rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind == rebound.EventRetry {
				select {
				case closed <- m.Close():
				default:
				}
			}
		})
		var err error
		m, err = subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithObserver(obs)))
		if err != nil {
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("New = %v; a refusal must match rebound.ErrInvalidArgument", err)
			}
			return // refused: correct
		}
		if _, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {}); err != nil {
			t.Fatalf("Subscribe = %v", err)
		}
		timeout := time.NewTimer(time.Hour)
		defer timeout.Stop()
		select {
		case err := <-closed:
			if !errors.Is(err, rebound.ErrCalledFromCallback) {
				t.Errorf("Close from the observer = %v, want rebound.ErrCalledFromCallback", err)
			}
		case <-timeout.C:
			t.Fatal("Close called from an observer given to WithPolicy has not returned after an hour")
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
	})
}

// countingBreaker admits every attempt and counts the admissions and
// their reports.
type countingBreaker struct {
	mu            sync.Mutex
	allowed, done int
}

func (b *countingBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	b.allowed++
	b.mu.Unlock()
	return func(error) {
		b.mu.Lock()
		b.done++
		b.mu.Unlock()
	}, nil
}

func (b *countingBreaker) counts() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowed, b.done
}

// TestBreakWithPolicyBreakerDoneOnce: a rebound.WithBreaker given to
// WithPolicy gates the subscriptions' attempts. Every admission it grants
// must be reported to it exactly once (an attempt made, or given back),
// through failures, a success, an Unsubscribe and Close; an admission
// never reported keeps a half-open breaker's probe counted for good.
func TestBreakWithPolicyBreakerDoneOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		var fail atomic.Bool
		fail.Store(true)
		reg.SetFailure(func(subscriber.Key) error {
			if fail.Load() {
				return subscribertest.ErrUnavailable
			}
			return nil
		})
		b := &countingBreaker{}
		m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithBreaker(b)))
		if err != nil {
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("New = %v; a refusal must match rebound.ErrInvalidArgument", err)
			}
			return
		}
		payments := subscriber.Key{Service: "payments"}
		s1, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Subscribe(context.Background(), payments, func([]subscriber.Instance) {}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // failures and retries
		fail.Store(false)
		select {
		case <-s1.Ready():
		case <-time.After(time.Minute):
			t.Fatal("orders never subscribed")
		}
		fail.Store(true)
		reg.Break(orders) // a disruption: a new run
		time.Sleep(5 * time.Second)
		if err := s1.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		allowed, done := b.counts()
		t.Logf("breaker: %d admitted, %d reported", allowed, done)
		if allowed == 0 || allowed != done {
			t.Errorf("the breaker admitted %d attempts and heard the end of %d: each admission is reported once", allowed, done)
		}
	})
}

// TestBreakWithPolicyObserverPanics: an observer given to WithPolicy that
// panics is recovered, as WithObserver's are: the subscription still
// subscribes. (Called by the engine, its panic was not recovered and
// ended the process.)
func TestBreakWithPolicyObserverPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		var fail atomic.Bool
		fail.Store(true)
		reg.SetFailure(func(subscriber.Key) error {
			if fail.Load() {
				return subscribertest.ErrUnavailable
			}
			return nil
		})
		obs := rebound.ObserverFunc(func(rebound.Event) { panic("observer bug") })
		m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithObserver(obs)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // failed attempts and retries, each observed
		fail.Store(false)
		select {
		case <-s.Ready():
		case <-time.After(time.Minute):
			t.Fatal("the subscription never subscribed")
		}
	})
}
