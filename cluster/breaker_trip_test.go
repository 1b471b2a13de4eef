package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBreakerTripNotLostAtIntervalEnd: ReadyToTrip runs with no lock held,
// so a closed interval can end between the failure being counted and its
// answer (a goroutine descheduled on a busy machine; here a ReadyToTrip
// that waits). A call in between that starts the next interval must not
// make the breaker forget the trip gobreaker would have made at once.
func TestBreakerTripNotLostAtIntervalEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked, answer := make(chan struct{}), make(chan struct{})
		var failing atomic.Bool
		inner := &mutableDir{}
		inner.set(valueInvoker{target: "a", call: func() (any, error) {
			if failing.Load() {
				return nil, errDown
			}
			return nil, nil
		}})
		d, err := NewBreakerDirectory(inner, WithMaxEjected(1), WithBreakerSettings(func(string) gobreaker.Settings {
			return gobreaker.Settings{Interval: 10 * time.Second, ReadyToTrip: func(c gobreaker.Counts) bool {
				if c.ConsecutiveFailures < 1 {
					return false
				}
				close(asked)
				<-answer
				return true
			}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		ivs, _ := d.List(context.Background(), &Invocation{})
		a := ivs[0]
		failing.Store(true)
		go func() { _, _ = a.Invoke(context.Background(), &Invocation{}) }()
		<-asked
		failing.Store(false)
		time.Sleep(11 * time.Second) // the interval ends
		if _, err := a.Invoke(context.Background(), &Invocation{}); err != nil {
			t.Fatal(err) // admitted: the breaker is still closed
		}
		close(answer)
		synctest.Wait()
		if st := d.members["a"].b.core.State(); st != gobreaker.StateOpen {
			t.Fatalf("ReadyToTrip answered true and the breaker is %v, want open (the trip was dropped because an interval ended meanwhile)", st)
		}
	})
}
