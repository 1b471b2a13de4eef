package rebound_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// TestBudgetRefusalsDoNotTeachTheThrottle: a retry the budget refuses
// (RefuseDefer) is not sent, so it is no request to the backend. With the
// throttle asked first, every refusal by the budget counted as a request
// the backend never accepted, and a run deferred by an empty budget drove
// the throttle's rejection probability towards 1 with no request sent.
func TestBudgetRefusalsDoNotTeachTheThrottle(t *testing.T) {
	b := mustBudget(t, 0, 0, 10*time.Second)
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter},
		rebound.WithBudget(b), rebound.WithThrottle(th), rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer),
		rebound.WithAdmission(rebound.FirstAttempt, 0)) // the failed first attempt was made outside the Schedule
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := newLoop(r, now)
	if d := s.decide(now, failed(errors.New("transient"))); d.Verdict() != rebound.WaitFor {
		t.Fatalf("first failure: %+v", d)
	}
	for range 100 {
		now = now.Add(time.Second)
		d := s.decide(now, ready(rebound.RetryAttempt))
		if d.Verdict() != rebound.WaitFor || !errors.Is(d.Reason, rebound.ErrBudgetExhausted) {
			t.Fatalf("retry with an empty budget: %+v; want a deferral by the budget", d)
		}
	}
	if p := th.Probability(now); p != 0 {
		t.Fatalf("after 100 retries refused by the budget (none sent), the throttle rejects with probability %v; want 0", p)
	}
}
