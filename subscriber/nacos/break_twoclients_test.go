package nacos_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
)

// TestBreakShutdownWithTheSameInstanceOnAnotherClient: another client
// holds the same address with the same values (two Registries of a
// process, or a restarted process whose old connection the server still
// holds). Nacos keeps each connection's instance apart and lists equal
// copies as one, so the server lists the values after this client's
// deregistration too. As with other values
// (TestShutdownWithTheAddressOnAnotherClient), Shutdown returns nil once
// its own connection no longer holds the instance, and the other
// client's instance stays listed. (It retried its deregistration until
// ctx ended and returned an error.)
func TestBreakShutdownWithTheSameInstanceOnAnotherClient(t *testing.T) {
	srv := newServer(t)
	ga := mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ga.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil (this client's instance is gone; the other client's copy of the address stays)", err)
	}
	if !listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("the other client's instance is gone")
	}
}
