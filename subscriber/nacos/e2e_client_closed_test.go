//go:build !race

package nacos_test

// The tests here close the nacos-sdk-go client and then use it, or close
// it while a Registration's instance is held: the client's
// connection-event listener then runs
// ConnectionEventListener.OnConnected -> redoRegisterEachService ->
// NamingGrpcProxy.requestToServer, which in nacos-sdk-go v2.3.2 reads and
// writes the proxy's state without a lock (the upstream race described in
// e2e_reconnect_test.go). It does not involve this module's code, so these
// tests are excluded from -race builds.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestShutdownAfterClientClosed: a closed client's connection is closed,
// so the server dropped its instances: Shutdown confirms that and
// returns nil (as its doc says), instead of retrying until ctx ends.
func TestShutdownAfterClientClosed(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	c.CloseClient()
	deadline := time.Now().Add(10 * time.Second)
	for listed(srv, "orders", "10.0.0.1", 8080) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after the client closed = %v, want nil (the server no longer lists it)", err)
	}
}

// TestStoppedLoopReportsItsBreakerAdmission: a check admitted by the
// breaker that finds the client closed stops the registration and gives
// the admission back. (The loop returned without telling the Schedule:
// the admission was never reported.)
func TestStoppedLoopReportsItsBreakerAdmission(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	br := &countingBreaker{}
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		nacos.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithBreaker(br)),
		nacos.WithCheckInterval(50*time.Millisecond))
	subscribertest.Eventually(t, e2eTimeout, "a check admitted by the breaker", func() bool { return br.admitted.Load() > 0 })
	c.CloseClient()
	subscribertest.Eventually(t, e2eTimeout, "the registration to stop", func() bool {
		return g.Status().State == subscriber.RegistrationStopped
	})
	if err := g.Close(); err != nil { // the loop has ended
		t.Fatal(err)
	}
	if a, r := br.admitted.Load(), br.reported.Load(); a != r {
		t.Fatalf("breaker admitted %d attempts, heard of %d: every admission must be reported once", a, r)
	}
}

// TestRegisterAfterClientClosed: ErrClosed (rebound.ErrClosed), nothing
// left running (the package's TestMain checks for leaks).
func TestRegisterAfterClientClosed(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	c.CloseClient()
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	if g != nil || !errors.Is(err, rebound.ErrClosed) || !errors.Is(err, nacos.ErrClosed) {
		t.Fatalf("Register after CloseClient = %v, %v; want ErrClosed", g, err)
	}
	if fmt.Sprint(err) == "" {
		t.Fatal("empty error text")
	}
}
