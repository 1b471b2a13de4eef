//go:build !race

package nacos_test

// This test restarts the nacostest server so that the nacos-sdk-go client
// reconnects, which trips data races inside nacos-sdk-go v2.3.2 itself
// (see e2e_reconnect_test.go): it is excluded from -race builds.

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakSlowObserverStallsOtherRegistrations shows that one
// Registration's slow observer stalls the client's connection monitor:
// a connection event reaches an idle Registration on the monitor's
// goroutine, which then calls that Registration's observers itself. While
// orders' observer blocks on its disconnect event, the monitor tells no
// other Registration of the reconnect, so billing never checks the server
// after the restart. Correct: an observer delays only its own
// Registration; billing checks the server after the reconnect as it does
// with no other Registration on the client (TestE2ERegisterCleanRestart).
func TestBreakSlowObserverStallsOtherRegistrations(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := rebound.WithObserver(registrationHooks{StateChanged: func(e regStateChange) {
		if e.To != subscriber.RegistrationRepairing {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(blocked)
			<-release // a slow observer: blocks until the test ends
		}
	}})
	mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), append(fastRegisterWith(slow), nacos.WithCheckInterval(0))...)
	var checks atomic.Int64
	billing := mustRegisterNacos(t, c, subscriber.Key{Service: "billing"}, inst("10.0.0.1", 9090),
		append(fastRegisterWith(countChecks(&checks)), nacos.WithCheckInterval(0))...)
	t.Cleanup(func() { close(release) }) // runs before the Registrations' Close
	srv.Stop()
	subscribertest.Eventually(t, e2eTimeout, "orders' observer to see the disconnect", func() bool {
		select {
		case <-blocked:
			return true
		default:
			return false
		}
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "billing to check the server after the reconnect", func() bool {
		return checks.Load() >= 1 && billing.Status().State == subscriber.RegistrationRegistered
	})
}
