package nacos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// refusingBreaker refuses the next n admissions, then admits.
type refusingBreaker struct{ refuse, admitted atomic.Int64 }

func (b *refusingBreaker) Allow() (func(error), error) {
	if b.refuse.Add(-1) >= 0 {
		return nil, errors.New("open")
	}
	b.admitted.Add(1)
	return func(error) {}, nil
}

// TestRegisteredShowsNoAttempts: a check the registration's breaker
// refused twice before admitting it (a local refusal, counted by the
// Schedule) found the instance listed: the registration is registered
// and its Status.Attempts is 0, as documented ("0 when registered"). (It
// kept the refusals' count, 2, while registered, until the next check.)
func TestRegisteredShowsNoAttempts(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	br := &refusingBreaker{}
	var checks atomic.Int64
	in := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in,
		nacos.WithRegisterPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}),
		nacos.WithRedoGrace(10*time.Millisecond), nacos.WithCheckInterval(0),
		nacos.WithRegisterRetryOptions(rebound.WithBreaker(br)),
		nacos.WithRegistrationHooks(subscriber.RegistrationHooks{Attempted: func(a subscriber.RegistrationAttempt) {
			if a.Op == subscriber.RegistrationOpCheck && a.Err == nil {
				checks.Add(1)
			}
		}}))
	subscribertest.Eventually(t, e2eTimeout, "registered", func() bool {
		return g.Status().State == subscriber.RegistrationRegistered
	})
	// Let any check the connection's start scheduled end before arming.
	time.Sleep(200 * time.Millisecond)
	before := checks.Load()
	br.refuse.Store(2)
	in.Weight = 2
	if err := g.Update(context.Background(), in); err != nil { // a check follows after the grace
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the check after the update, admitted after two refusals", func() bool {
		return br.refuse.Load() < 0 && checks.Load() > before
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := g.Status()
		if st.State == subscriber.RegistrationRegistered && st.Attempts == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status = %+v, want registered with Attempts 0", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
