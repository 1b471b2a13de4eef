package nacos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// refusingBreaker refuses the next n admissions, then admits.
type refusingBreaker struct{ refuse, admitted atomic.Int64 }

func (b *refusingBreaker) Allow() (func(error), error) {
	if b.refuse.Add(-1) >= 0 {
		return nil, errors.New("open")
	}
	b.admitted.Add(1)
	return func(error) {}, nil
}

// TestRegisteredShowsNoAttempts: a check the registration's breaker
// refused twice before admitting it (a local refusal, counted by the
// Schedule) found the instance listed: the registration is registered
// and its Status.Attempts is 0, as documented ("0 when registered"). (It
// kept the refusals' count, 2, while registered, until the next check.)
func TestRegisteredShowsNoAttempts(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	br := &refusingBreaker{}
	var checks atomic.Int64
	in := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in,
		nacos.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithBreaker(br),
			rebound.WithObserver(registrationHooks{Attempted: func(a regAttempt) {
				if a.Op == "check" && a.Err == nil {
					checks.Add(1)
				}
			}})),
		nacos.WithRedoGrace(10*time.Millisecond), nacos.WithCheckInterval(0))
	subscribertest.Eventually(t, e2eTimeout, "registered", func() bool {
		return g.Status().State == subscriber.RegistrationRegistered
	})
	// Let any check the connection's start scheduled end before arming.
	time.Sleep(200 * time.Millisecond)
	before := checks.Load()
	br.refuse.Store(2)
	in.Weight = 2
	if err := g.Update(context.Background(), in); err != nil { // a check follows after the grace
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the check after the update, admitted after two refusals", func() bool {
		return br.refuse.Load() < 0 && checks.Load() > before
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := g.Status()
		if st.State == subscriber.RegistrationRegistered && st.Attempts == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status = %+v, want registered with Attempts 0", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countingBreaker admits every attempt and counts the admissions and
// their reports.
type countingBreaker struct{ admitted, reported atomic.Int64 }

func (b *countingBreaker) Allow() (func(error), error) {
	b.admitted.Add(1)
	return func(error) { b.reported.Add(1) }, nil
}

// failingDeregister is a real client whose first deregister request the
// server refuses. It notes, before each request, whether the server
// lists the instance; with redoRace, the instance is registered again
// right after the second request, as the SDK's redo of its first
// connection event does when it races the deregistration (its copy
// taken before).
type failingDeregister struct {
	*naming_client.NamingClient // the configuration getters too: the deregistration is confirmed by a lookup
	srv                         *nacostest.Server
	redoRace                    bool
	n                           atomic.Int64
	mu                          sync.Mutex
	listedAt                    []bool // by request
}

func (c *failingDeregister) DeregisterInstance(p vo.DeregisterInstanceParam) (bool, error) {
	c.mu.Lock()
	c.listedAt = append(c.listedAt, listed(c.srv, p.ServiceName, p.Ip, p.Port))
	c.mu.Unlock()
	switch c.n.Add(1) {
	case 1:
		return false, nil
	case 2:
		ok, err := c.NamingClient.DeregisterInstance(p)
		if c.redoRace {
			_, _ = c.NamingClient.RegisterInstance(vo.RegisterInstanceParam{Ip: p.Ip, Port: p.Port, Weight: 1, Enable: true, Healthy: true,
				ServiceName: p.ServiceName, GroupName: p.GroupName, Ephemeral: true, Metadata: map[string]string{"v": "1"}}) // the redo re-sends the registered values
		}
		return ok, err
	}
	return c.NamingClient.DeregisterInstance(p)
}

// TestShutdownReportsEveryBreakerAdmission: the breaker of
// WithPolicy's options hears the outcome of every attempt it
// admitted, the deregistration's successful retry included. (Shutdown
// returned on that success without telling the Schedule, so the
// breaker's admission was never reported: a half-open breaker shared
// with other loops stayed waiting for its probe.) One refused request
// and one retry; a further request only when the lookup after a request
// still listed the instance (the SDK's redo racing the deregistration,
// as documented): the test counted those too and failed now and then on
// a busy machine ("3 deregister requests, want 2").
func TestShutdownReportsEveryBreakerAdmission(t *testing.T) {
	for _, redoRace := range []bool{false, true} {
		t.Run(fmt.Sprintf("redoRace=%v", redoRace), func(t *testing.T) {
			srv := newServer(t)
			c := &failingDeregister{NamingClient: newClient(t, srv).(*naming_client.NamingClient), srv: srv, redoRace: redoRace}
			br := &countingBreaker{}
			g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
				nacos.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithBreaker(br)))
			ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
			defer cancel()
			if err := g.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			at := slices.Clone(c.listedAt)
			c.mu.Unlock()
			if len(at) < 2 {
				t.Fatalf("%d deregister requests, want at least 2 (one refused, one retry)", len(at))
			}
			for i, l := range at[2:] {
				if !l {
					t.Fatalf("deregister request %d of %d was sent while the server no longer listed the instance (listed before each: %v)", i+3, len(at), at)
				}
			}
			if redoRace && len(at) < 3 {
				t.Fatalf("%d deregister requests after a redo registered the instance again, want a third", len(at))
			}
			if listed(srv, "orders", "10.0.0.1", 8080) {
				t.Fatal("Shutdown returned nil but the server lists the instance")
			}
			if a, r := br.admitted.Load(), br.reported.Load(); a == 0 || a != r {
				t.Fatalf("breaker admitted %d attempts, heard of %d: every admission must be reported once", a, r)
			}
		})
	}
}
