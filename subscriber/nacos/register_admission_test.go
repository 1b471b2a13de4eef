package nacos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// refusingDeregister is a real client whose deregister requests the
// server refuses (Nacos answers false).
type refusingDeregister struct {
	naming_client.INamingClient
	n atomic.Int64
}

func (c *refusingDeregister) DeregisterInstance(vo.DeregisterInstanceParam) (bool, error) {
	c.n.Add(1)
	return false, nil
}

// TestShutdownRetriesAreAdmittedByTheSchedule: Shutdown's deregistration
// retries are admitted by the registration's Schedule like its repairs,
// so the gates of WithPolicy's options apply to them: with a shared
// limiter holding one token (the next in an hour), Shutdown sends its
// first request and one retry, then waits for a token until ctx ends.
// (Waiting only the backoff, it sent a retry every millisecond.)
func TestShutdownRetriesAreAdmittedByTheSchedule(t *testing.T) {
	srv := newServer(t)
	c := &refusingDeregister{INamingClient: newClient(t, srv)}
	lim := rate.NewLimiter(rate.Every(time.Hour), 1)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		nacos.WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond}, rebound.WithLimiter(lim)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nacos.ErrRejected) {
		t.Fatalf("Shutdown = %v, want ctx's deadline joined with the last refusal", err)
	}
	if n := c.n.Load(); n != 2 {
		t.Fatalf("%d deregister requests in 1 s, want 2: the first and one retry (the limiter's only token)", n)
	}
	if st := g.Status(); st.Attempts != 2 {
		t.Fatalf("Status.Attempts = %d, want 2 (the Schedule's count of failed attempts)", st.Attempts)
	}
}
