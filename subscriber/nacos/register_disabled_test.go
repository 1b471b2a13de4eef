package nacos_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestDisabledInstanceIsNotRepairedAtEveryCheck: the server's query
// leaves disabled instances out, so a disabled instance (registered so,
// updated to disabled: the first step of a drain, or disabled by an
// operator) is not listed. The periodic check must not take that for a
// loss at every check (each check registered the instance again:
// Repairs climbed by one per check, a request storm with a small
// WithCheckInterval). A disabled instance is not checked against a list
// that cannot hold it; one an operator disabled is registered again
// (which does not undo the disable) only as the Schedule's backoff
// allows, as a repair that failed, not at every check.
func TestDisabledInstanceIsNotRepairedAtEveryCheck(t *testing.T) {
	policy := func(opts ...rebound.Option) nacos.Option {
		return nacos.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}, opts...)
	}
	for _, tc := range []struct {
		name    string
		disable func(t *testing.T, srv *nacostest.Server, g subscriber.Registration)
		repairs int // at most
		paced   bool
	}{
		{"registered disabled", nil, 0, false},
		{"updated to disabled", func(t *testing.T, _ *nacostest.Server, g subscriber.Registration) {
			in := g.Instance()
			in.Enabled = false
			if err := g.Update(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			// The SDK's redo of its first connection event may re-send
			// the enabled copy after the Update: one repair then.
		}, 1, false},
		{"disabled by an operator", func(t *testing.T, srv *nacostest.Server, g subscriber.Registration) {
			in := g.Instance()
			if err := srv.UpdateInstance("", "", "orders", nacostest.Instance{Ip: in.IP, Port: in.Port, Weight: in.Weight, Enable: false}); err != nil {
				t.Fatal(err)
			}
			// The first registration that the server does not list right
			// after it is taken for a server catching up (a repair); from
			// the second in a row on, a failed repair paced by the Schedule.
		}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			c := newClient(t, srv)
			var checks, registers atomic.Int64
			in := inst("10.0.0.1", 8080)
			in.Enabled = tc.disable != nil
			g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in,
				append(fastRegister, policy(countChecks(&checks, &registers)), nacos.WithCheckInterval(20*time.Millisecond))...)
			if tc.disable != nil {
				tc.disable(t, srv, g)
			}
			from, regs := checks.Load(), registers.Load()
			subscribertest.Eventually(t, e2eTimeout, "twenty more checks", func() bool { return checks.Load() >= from+20 })
			st := g.Status()
			sent := registers.Load() - regs
			switch {
			case st.Repairs > tc.repairs:
				t.Fatalf("%d repairs over 20 checks of a disabled instance; want at most %d", st.Repairs, tc.repairs)
			case !tc.paced && sent > int64(tc.repairs):
				t.Fatalf("%d register requests over 20 checks of a disabled instance; want at most %d", sent, tc.repairs)
			case tc.paced && (st.State != subscriber.RegistrationRepairing || sent > int64(st.Attempts)+2):
				t.Fatalf("%d register requests, Status %+v: want repairing, each request after the first a retry of the Schedule (Attempts)", sent, st)
			}
			if ins := srv.Instances("", "", "orders"); len(ins) != 1 || ins[0].Enable {
				t.Fatalf("server holds %+v, want the instance, disabled", ins)
			}
		})
	}
}

// countChecks returns an observer counting the registration's successful
// checks and (if registers is not nil) its register requests.
func countChecks(n *atomic.Int64, registers ...*atomic.Int64) rebound.Option {
	return rebound.WithObserver(registrationHooks{Attempted: func(a regAttempt) {
		switch {
		case a.Op == "check" && a.Err == nil:
			n.Add(1)
		case a.Op == "register" && len(registers) > 0:
			registers[0].Add(1)
		}
	}})
}
