package rebound_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
)

// TestRetrierBreakerAttemptPanics: an attempt that panics is reported to
// the breaker as a failure (as gobreaker's own Execute does) before the
// panic goes on, on the first attempt and on a retry. Before, done was
// never called: a half-open gobreaker kept its one probe counted for good
// and refused every later call of every loop sharing it.
func TestRetrierBreakerAttemptPanics(t *testing.T) {
	for _, onRetry := range []bool{false, true} {
		name := "first attempt"
		if onRetry {
			name = "retry"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
					Timeout:     time.Second,
					ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
				})
				// NoJitter: the retry comes 1.5 s later, after the breaker's 1 s open
				// timeout (a fully jittered delay could come while it is open).
				r, err := rebound.NewRetrier(rebound.Policy{Initial: 1500 * time.Millisecond, Max: 1500 * time.Millisecond, Jitter: rebound.NoJitter},
					rebound.WithBreaker(cb), rebound.WithMaxAttempts(3))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				down := rebound.Transient(errors.New("down"))
				if err := r.Do(ctx, func(context.Context) error { return down }); err == nil {
					t.Fatal("want the failing loop to fail")
				}
				if cb.State() != gobreaker.StateOpen {
					t.Fatalf("state %v, want open", cb.State())
				}
				time.Sleep(2 * time.Second) // half-open: one probe
				panicked := false
				func() {
					defer func() { panicked = recover() != nil }()
					n := 0
					_ = r.Do(ctx, func(context.Context) error {
						n++
						if onRetry && n == 1 {
							return down // opens it again; the retry is the next probe
						}
						panic("boom")
					})
				}()
				if !panicked {
					t.Fatal("the attempt did not panic")
				}
				time.Sleep(2 * time.Second) // half-open again, if the panic was counted
				if err := r.Do(ctx, func(context.Context) error { return nil }); err != nil {
					t.Fatalf("after the probe panicked: %v (state %v, counts %+v): the breaker never admits again", err, cb.State(), cb.Counts())
				}
			})
		})
	}
}

// TestScheduleSucceededHookPanics: the breaker hears a success before the
// hooks do, so a hook that panics (and a caller that recovers) does not
// keep a half-open gobreaker's probe counted for good.
func TestScheduleSucceededHookPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
			Timeout:     time.Second,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		})
		panicky := true
		r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter},
			rebound.WithBreaker(cb), rebound.WithObserver(rebound.Hooks{Attempted: func(rebound.Event) {
				if panicky {
					panic("hook")
				}
			}}))
		if err != nil {
			t.Fatal(err)
		}
		done, _ := cb.Allow()
		done(errors.New("down")) // open
		time.Sleep(2 * time.Second)
		s := newLoop(r, time.Now())
		if d := s.decide(time.Now(), ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("the half-open breaker's probe: %+v", d)
		}
		func() {
			defer func() { _ = recover() }()
			s.decide(time.Now(), succeeded())
		}()
		panicky = false
		s2 := newLoop(r, time.Now())
		if d := s2.decide(time.Now(), ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("after the probe succeeded (a hook panicked): %+v (state %v, counts %+v): the breaker never admits again", d, cb.State(), cb.Counts())
		}
	})
}
