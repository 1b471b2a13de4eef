package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Shutdown called while another Shutdown retries the revocation (the
// cluster is down) returns when its own ctx ends: every wait selects on
// its ctx.
func TestConcurrentShutdownReturnsWithItsCtx(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80),
		etcdreg.WithTTL(time.Minute), etcdreg.WithAttemptTimeout(200*time.Millisecond),
		etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}, rebound.WithObserver(hooks)))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	first := make(chan error, 1)
	go func() { first <- g.Shutdown(ctx) }()
	select {
	case <-failed:
	case <-ctx.Done():
		t.Fatal("no failed revoke while the cluster was down")
	}
	short, cancelShort := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() { second <- g.Shutdown(short) }()
	cancelShort()
	select {
	case err := <-second:
		if err == nil {
			t.Errorf("the second Shutdown returned nil with the cluster down")
		}
	case <-time.After(waitTimeout):
		t.Errorf("the second Shutdown did not return within %v of its ctx's end (it waits for the first's ctx)", waitTimeout)
		cancel()
		<-second
	}
	cancel()
	<-first
}
