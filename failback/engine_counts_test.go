package failback

import (
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// throttleRequests returns a function that counts a request to th at now,
// as another loop sharing th does (a first attempt through the engine),
// and reports whether th let it through; accept, when true, also counts
// the backend's accept of it.
func throttleRequests(t testing.TB, th *rebound.AdaptiveThrottle) func(now time.Time, accept bool) bool {
	t.Helper()
	r, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithThrottle(th))
	if err != nil {
		t.Fatal(err)
	}
	return func(now time.Time, accept bool) bool {
		ok := admit.Begin(r, now) == nil
		if accept {
			admit.Record(r, nil, now)
		}
		return ok
	}
}

// takeRetry takes a retry from b at now, as another loop sharing b does
// after a failure, and reports whether b allowed it.
func takeRetry(t testing.TB, b *rebound.RetryBudget, now time.Time) bool {
	t.Helper()
	r, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(b), admit.First(0).(rebound.Option))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.NewSchedule(now).Admit(now) // a first attempt through no gate: no deposit
	d := a.Done(errors.New("refused"), now)
	return !d.Stop
}
