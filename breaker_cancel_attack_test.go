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

// The Breaker doc's own gobreaker setup: a half-open breaker's probe
// admitted by Admit and then abandoned with Cancel (nothing was sent)
// leaves the breaker half-open. Before the doc added IsExcluded, its setup
// counted the cancelled probe as a success and closed the breaker.
func TestCancelledProbeLeavesTheDocsBreakerHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
			Timeout:      time.Second,
			ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			IsSuccessful: func(err error) bool { return !rebound.IsTransient(err) }, // as in the Breaker doc
			IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) },
		})
		r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithBreaker(cb))
		if err != nil {
			t.Fatal(err)
		}
		down := rebound.Transient(errors.New("down"))
		s := r.NewSchedule(time.Now())
		a, d := s.AdmitKind(time.Now(), rebound.FirstAttempt)
		if d.Verdict() != rebound.AttemptNow {
			t.Fatalf("Admit = %+v", d)
		}
		a.Done(down, time.Now())
		if cb.State() != gobreaker.StateOpen {
			t.Fatalf("state %v, want open", cb.State())
		}
		time.Sleep(2 * time.Second) // half-open: one probe
		s2 := r.NewSchedule(time.Now())
		if _, d = s2.AdmitKind(time.Now(), rebound.FirstAttempt); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("probe Admit = %+v", d)
		}
		s2.Cancel(time.Now()) // the probe will not be made (its ctx ended)
		if st := cb.State(); st != gobreaker.StateHalfOpen {
			t.Fatalf("after a half-open probe was admitted and cancelled unsent: breaker state %v; want half-open (no outcome observed)", st)
		}
	})
}
