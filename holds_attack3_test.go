package rebound_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// Time going backwards: a Done at a time before the run's start reports a
// negative Event.Elapsed to the hooks (and the meter), "the time since the
// work began".
func TestBackwardsTimeNegativeElapsed(t *testing.T) {
	var got []time.Duration
	r := bk3Retrier(t, bk3Policy, rebound.WithObserver(rebound.Hooks{
		Retried: func(e rebound.Event) { got = append(got, e.Elapsed) },
	}))
	s := r.NewSchedule(bk3T0)
	a, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	a.Done(errBk3, bk3T0.Add(-time.Hour)) // the clock stepped back
	if len(got) != 1 || got[0] < 0 {
		t.Fatalf("Retried Elapsed = %v; want >= 0", got)
	}
}
