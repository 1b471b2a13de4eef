package subscriber_test

import (
	"context"
	"errors"
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
