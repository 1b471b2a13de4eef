package nacos_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A server that lists the instance with values other than the
// registered ones after a repair (Nacos applies an operator's weight or
// enabled flag over the client's; here two clients register one address
// with different weights) must not be repaired at every check: each
// check found the other values, registered the instance again, and two
// Registrations took the address from each other for ever.
func TestRegisterCheckDoesNotFightOtherValues(t *testing.T) {
	srv := newServer(t)
	opts := append(fastRegister, nacos.WithCheckInterval(100*time.Millisecond))
	a := inst("10.0.0.1", 8080)
	b := a
	b.Weight = 7
	ga := mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, a, opts...)
	gb := mustRegisterNacos(t, newClient(t, srv), subscriber.Key{Service: "orders"}, b, opts...)
	start := srv.Stats().Requests[nacostest.RequestServiceQuery]
	subscribertest.Eventually(t, e2eTimeout, "twenty checks", func() bool {
		return srv.Stats().Requests[nacostest.RequestServiceQuery] >= start+20
	})
	if ra, rb := ga.Status().Repairs, gb.Status().Repairs; ra+rb > 2 {
		t.Fatalf("repairs %d and %d; want at most one each (the server lists the address, with the other's weight)", ra, rb)
	}
}
