package nacos_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
)

// TestShutdownWithTheAddressOnAnotherClient: two clients (two processes,
// or a process's two Registries) register one address of a service.
// Nacos keeps each connection's instance apart and lists the address
// while either holds it, so one's Shutdown must end once its own
// connection no longer holds the instance, not wait for the other's to
// leave: it retried its deregistration until ctx ended.
func TestShutdownWithTheAddressOnAnotherClient(t *testing.T) {
	srv := newServer(t)
	a, b := inst("10.0.0.1", 8080), inst("10.0.0.1", 8080)
	b.Weight = 2
	ga := mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, a, fastRegister...)
	mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, b, fastRegister...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ga.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil (this client's instance is gone; the other client's copy of the address stays)", err)
	}
	if !listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("the other client's instance is gone")
	}
}
