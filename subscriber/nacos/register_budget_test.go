package nacos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// TestShutdownRetriesDeferOnAnEmptyBudget: a retry budget shared through
// WithRegisterRetryOptions paces the deregistration's retries; it does
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
	budget, err := rebound.NewRetryBudget(rebound.BudgetRatio(0), rebound.BudgetMinPerSecond(0))
	if err != nil {
		t.Fatal(err)
	}
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		nacos.WithRegisterPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}),
		nacos.WithRegisterRetryOptions(rebound.WithBudget(budget)))
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
