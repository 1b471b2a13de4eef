package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Shutdown (and so subscriber.Drain) retries the revocation within its
// ctx: a cluster that comes back while the drain still has time gets the
// lease revoked and the key deleted. It sent one revoke and returned its
// error, leaving the instance listed until its lease expired.
func TestShutdownRetriesRevokeWithinCtx(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	failed := make(chan struct{}, 1)
	hooks := registrationHooks{Attempted: func(a regAttempt) {
		if a.Op == "deregister" && a.Err != nil {
			select {
			case failed <- struct{}{}:
			default:
			}
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80),
		etcdreg.WithTTL(time.Minute), etcdreg.WithAttemptTimeout(500*time.Millisecond),
		etcdreg.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond}, rebound.WithObserver(hooks)))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	res := make(chan error, 1)
	go func() { res <- subscriber.Drain(ctx, 0, func(context.Context) error { return nil }, g) }()
	select {
	case <-failed: // the cluster is down: the first revoke failed
	case <-ctx.Done():
		t.Fatal("no failed revoke while the cluster was down")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Drain with the cluster back well within its ctx: %v; want the lease revoked", err)
	}
	resp, err := cli.Get(ctx, g.InstanceKey())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("after the drain the key holds %v (%v); want it deleted", resp, err)
	}
}
