package rebound_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

// lateTimer is a timer that fires 1 ms after it is due, as a real one
// may (scheduling, a GC pause).
type lateTimer struct{ t *time.Timer }

func (l *lateTimer) Start(d time.Duration) {
	if l.t != nil {
		l.t.Stop()
	}
	l.t = time.NewTimer(d + time.Millisecond)
}
func (l *lateTimer) Stop() {
	if l.t != nil {
		l.t.Stop()
	}
}
func (l *lateTimer) C() <-chan time.Time { return l.t.C }

// TestRetryLastRetryNotLostToTimerLateness: a retry whose due time the
// policy allowed (1 s after the failure, MaxElapsed 1 s) is made by Retry
// whatever gates the Retrier has. With a throttle, Retry asked the gates
// after its timer and the engine stopped the retry as one that "came due
// after MaxElapsed" when the timer fired a millisecond late, while the
// same Retry without a gate made it.
func TestRetryLastRetryNotLostToTimerLateness(t *testing.T) {
	p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) []rebound.Option
	}{
		{"no gate", func(*testing.T) []rebound.Option { return nil }},
		{"throttle", func(t *testing.T) []rebound.Option {
			th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 10 { // a healthy backend: the throttle lets every attempt through
				th.Accepted(time.Now())
			}
			return []rebound.Option{rebound.WithThrottle(th)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := append(tc.opts(t), rebound.WithTimer(func() backoff.Timer { return &lateTimer{} }), rebound.WithMaxElapsed(time.Second))
				r, err := rebound.NewRetrier(p, opts...)
				if err != nil {
					t.Fatal(err)
				}
				calls := 0
				err = r.Do(context.Background(), func(context.Context) error {
					calls++
					if calls == 1 {
						return errors.New("transient")
					}
					return nil
				})
				if err != nil || calls != 2 {
					t.Fatalf("Do = %v after %d calls; want nil after 2 (the retry the policy allowed at 1 s)", err, calls)
				}
			})
		})
	}
}
