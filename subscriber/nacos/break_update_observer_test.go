package nacos_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakUpdateFromObserver calls Update from an observer of the
// Registration while a repair runs (the server lost the instance): one
// called with the Registration's events (its state moving to
// repairing), one with the engine's (the repair's attempt). Both run
// inside a step of the repair loop. Update used to post its request to
// the loop and wait for it: the step calling the observer never ended
// meanwhile, so Update waited for its ctx and the repair stalled.
// Correct: Update returns without waiting for its ctx, the server takes
// the new values, and the Registration goes on (Shutdown returns nil).
func TestBreakUpdateFromObserver(t *testing.T) {
	for _, tc := range []struct {
		name string
		from func(g func() subscriber.Registration, call func(subscriber.Registration)) rebound.Observer
	}{
		{"registration event", func(g func() subscriber.Registration, call func(subscriber.Registration)) rebound.Observer {
			return registrationHooks{StateChanged: func(e regStateChange) {
				if r := g(); r != nil && e.To == subscriber.RegistrationRepairing {
					call(r)
				}
			}}
		}},
		{"engine event", func(g func() subscriber.Registration, call func(subscriber.Registration)) rebound.Observer {
			return rebound.ObserverFunc(func(e rebound.Event) {
				if r := g(); r != nil && e.Kind == rebound.EventAttempt && e.Detail == nil {
					call(r)
				}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			c := newClient(t, srv)
			var reg atomic.Pointer[subscriber.Registration]
			var once sync.Once
			returned := make(chan error, 1)
			load := func() subscriber.Registration {
				if p := reg.Load(); p != nil {
					return *p
				}
				return nil
			}
			obs := tc.from(load, func(g subscriber.Registration) {
				once.Do(func() {
					ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout/2)
					defer cancel()
					up := inst("10.0.0.1", 8080)
					up.Weight = 7
					returned <- g.Update(ctx, up)
				})
			})
			g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
				append(fastRegisterWith(rebound.WithObserver(obs)), nacos.WithCheckInterval(200*time.Millisecond))...)
			reg.Store(&g)
			subscribertest.Eventually(t, e2eTimeout, "a first check", func() bool {
				return srv.Stats().Requests[nacostest.RequestServiceQuery] > 0
			})
			if n := srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080); n != 1 {
				t.Fatalf("ForgetClientInstances = %d", n)
			}
			select {
			case err := <-returned:
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Update from the observer waited for its ctx: %v", err)
				}
				if err != nil {
					t.Fatalf("Update from the observer = %v, want nil", err)
				}
			case <-time.After(e2eTimeout):
				t.Fatal("Update from the observer never returned")
			}
			subscribertest.Eventually(t, e2eTimeout, "the server to list the instance with the new weight", func() bool {
				ins := srv.Instances("", "", "orders")
				return len(ins) == 1 && ins[0].Weight == 7
			})
			if w := g.Instance().Weight; w != 7 {
				t.Fatalf("Instance().Weight = %v after the Update, want 7", w)
			}
			ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
			defer cancel()
			if err := g.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown = %v", err)
			}
		})
	}
}
