package nacos_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestShutdownRetriesDeferOnAnEmptyBudget: a retry budget shared through
// WithPolicy's options paces the deregistration's retries; it does
// not end them. With a budget that holds no retry (no floor, no traffic),
// Shutdown keeps asking (each refusal waits a backoff step) until ctx
// ends, and returns ctx's error joined with the last refusal, as without
// a budget. (Under the engine's default rule for a budget, RefuseStop,
// the first refusal ended Shutdown at once with rebound.ErrBudgetExhausted
// and the instance stayed registered; the repair loop stopped for good
// the same way.)
func TestShutdownRetriesDeferOnAnEmptyBudget(t *testing.T) {
	srv := newServer(t)
	c := &refusingDeregister{INamingClient: newClient(t, srv)}
	budget, err := rebound.NewRetryBudget(0, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		nacos.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithBudget(budget)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = g.Shutdown(ctx)
	if errors.Is(err, rebound.ErrBudgetExhausted) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nacos.ErrRejected) {
		t.Fatalf("Shutdown = %v, want ctx's deadline joined with the last refusal (a budget refusal defers)", err)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("%d deregister requests, want 1: the budget admits no retry", n)
	}
	if st := g.Status(); st.Attempts < 2 {
		t.Fatalf("Status.Attempts = %d, want the refusals counted (the Schedule's count)", st.Attempts)
	}
}

// TestRepairDefersOnAnEmptyBudget: the repair loop under a shared budget
// that runs dry while the server rejects the re-registration keeps the
// registration repairing (it never stops on a local refusal) and
// registers the instance again once the server accepts and the budget's
// floor admits a retry. (It was stopped for good at the first refusal.)
func TestRepairDefersOnAnEmptyBudget(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	budget, err := rebound.NewRetryBudget(0, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		nacos.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}, rebound.WithBudget(budget), rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind == rebound.EventThrottled && errors.Is(e.Err, rebound.ErrBudgetExhausted) {
				refused.Add(1)
			}
		}))),
		nacos.WithRedoGrace(50*time.Millisecond), nacos.WithCheckInterval(100*time.Millisecond))
	subscribertest.Eventually(t, e2eTimeout, "a first check", func() bool {
		return srv.Stats().Requests[nacostest.RequestServiceQuery] > 0
	})
	if err := srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{Fraction: 1}); err != nil {
		t.Fatal(err)
	}
	if n := srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080); n != 1 {
		t.Fatalf("ForgetClientInstances = %d", n)
	}
	subscribertest.Eventually(t, e2eTimeout, "the budget to refuse a repair", func() bool {
		return refused.Load() > 0 || g.Status().State == subscriber.RegistrationStopped
	})
	if err := srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{}); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the instance to be registered again", func() bool {
		st := g.Status()
		return st.State == subscriber.RegistrationStopped || (st.State == subscriber.RegistrationRegistered && listed(srv, "orders", "10.0.0.1", 8080))
	})
	if st := g.Status(); st.State != subscriber.RegistrationRegistered {
		t.Fatalf("Status = %+v, want registered again: a budget refusal defers a repair", st)
	}
}

// TestDeregisterRejectionDoesNotSaySubscribe: a deregister request the
// server refuses is reported as a rejected deregister, not as a rejected
// subscribe (ErrRejected's text named the subscribe request whatever the
// request was).
func TestDeregisterRejectionDoesNotSaySubscribe(t *testing.T) {
	srv := newServer(t)
	c := &refusingDeregister{INamingClient: newClient(t, srv)}
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.Shutdown(ctx)
	if !errors.Is(err, nacos.ErrRejected) || strings.Contains(err.Error(), "subscribe") {
		t.Fatalf("Shutdown = %v, want a rejected deregister that does not speak of a subscribe", err)
	}
}
