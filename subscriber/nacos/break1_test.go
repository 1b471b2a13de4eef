package nacos_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakPolicyObserverCallsClose: WithPolicy passes every
// engine option to the repairs' Retrier, so a rebound.WithObserver given
// there is called by the engine inside a step of the repair loop, where
// WithRegistrationObserver's guard does not reach. Close called from it
// waits for that step: it never returns. Correct: Close from any observer
// of the Registration returns an error matching
// rebound.ErrCalledFromCallback and the Registration stops (as for
// WithRegistrationObserver's), or WithPolicy refuses the option.
// The scenario runs in a process of its own: while the defect lasts it
// leaves a goroutine that never ends.
func TestBreakPolicyObserverCallsClose(t *testing.T) {
	if !inChildProcess(t) {
		return
	}
	srv := newServer(t)
	c := newClient(t, srv)
	var reg atomic.Pointer[subscriber.Registration]
	entered, returned := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var closeErr error // written before returned is closed
	obs := rebound.ObserverFunc(func(e rebound.Event) {
		g := reg.Load()
		if e.Kind != rebound.EventAttempt || e.Detail != nil || g == nil {
			return // the engine's events only (the registration's have a Detail)
		}
		once.Do(func() {
			close(entered)
			closeErr = (*g).Close()
			close(returned)
		})
	})
	opts := append(fastRegister[:len(fastRegister):len(fastRegister)], nacos.WithCheckInterval(200*time.Millisecond),
		nacos.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, rebound.WithObserver(obs)))
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), opts...)
	if err != nil {
		if errors.Is(err, rebound.ErrInvalidArgument) {
			return // refused: correct
		}
		t.Fatal(err)
	}
	reg.Store(&g)
	closedFromObserver(t, srv, g, "the engine's observer to see an attempt", entered, returned, &closeErr)
}

// TestBreakLimiterBurstZeroStopsRegistration: a limiter shared through
// WithPolicy whose burst is set to 0 for a while (a pause of
// every repair) makes the engine stop the run ("can never grant a
// token"), and the registration stops for good: state stopped, never
// repaired once the burst is back. The docs say a registration never
// stops and a local refusal defers an attempt. Correct: the registration
// waits and repairs once the limiter can grant again (as a subscription
// does).
func TestBreakLimiterBurstZeroStopsRegistration(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	lim := rate.NewLimiter(1000, 10)
	opts := append(fastRegister[:len(fastRegister):len(fastRegister)], nacos.WithCheckInterval(200*time.Millisecond),
		nacos.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, rebound.WithLimiter(lim)))
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	subscribertest.Eventually(t, e2eTimeout, "a first check", func() bool {
		return srv.Stats().Requests[nacostest.RequestServiceQuery] > 0
	})
	lim.SetBurst(0) // repairs paused: a retry waits
	if err := srv.SetRequestError(nacostest.RequestInstance, 500); err != nil {
		t.Fatal(err)
	}
	if n := srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080); n != 1 {
		t.Fatalf("ForgetClientInstances = %d", n)
	}
	subscribertest.Eventually(t, e2eTimeout, "a failed repair", func() bool {
		return g.Status().State == subscriber.RegistrationRepairing || g.Status().State == subscriber.RegistrationStopped
	})
	// The pause lasts a second: the retry comes due in it (the policy waits
	// at most 500 ms). A retry due later would make the test pass, never fail.
	time.Sleep(time.Second)
	lim.SetBurst(10)
	srv.ClearFaults()
	subscribertest.Eventually(t, e2eTimeout, "the registration to be repaired once the limiter grants again", func() bool {
		st := g.Status()
		return st.State == subscriber.RegistrationStopped || (st.State == subscriber.RegistrationRegistered && len(srv.Instances("", "", "orders")) == 1)
	})
	if st := g.Status(); st.State != subscriber.RegistrationRegistered {
		t.Fatalf("Status = %v (%v), want registered again: a limiter that pauses repairs defers them", st.State, st.LastErr)
	}
}

// TestBreakLimiterBurstZeroEndsShutdown: Shutdown retries the deregister
// "until ctx is done (it then returns ctx's error, or the last
// attempt's)". With a limiter shared through WithPolicy whose
// burst is 0 (repairs paused), the first retry's admission stops the run
// and Shutdown returns at once, long before ctx ends, with the limiter's
// error. Correct: the paused retry waits, and Shutdown returns ctx's
// error when ctx ends.
func TestBreakLimiterBurstZeroEndsShutdown(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	lim := rate.NewLimiter(1000, 10)
	opts := append(fastRegister[:len(fastRegister):len(fastRegister)],
		nacos.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, rebound.WithLimiter(lim)))
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	lim.SetBurst(0)
	if err := srv.SetRequestError(nacostest.RequestInstance, 500); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = g.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		t.Fatalf("Shutdown = %v (ctx done: %v), want ctx's error once ctx ended: a paused limiter defers the retry", err, ctx.Err() != nil)
	}
}

// TestBreakShutdownRecompilesPolicyOptions: Shutdown compiles
// WithPolicy's options again, at the time of the Shutdown. A
// limiter shared there whose burst is 0 at that moment (repairs paused)
// fails that check, and Shutdown returns the *rebound.ArgumentError of
// rebound.WithLimiter without sending the deregister, though its first
// request asks no gate: the instance stays registered. Correct: Shutdown
// deregisters (nil, the instance gone).
func TestBreakShutdownRecompilesPolicyOptions(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	lim := rate.NewLimiter(1000, 10)
	opts := append(fastRegister[:len(fastRegister):len(fastRegister)],
		nacos.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, rebound.WithLimiter(lim)))
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	before := srv.Stats().Requests[nacostest.RequestInstance]
	lim.SetBurst(0)
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(ctx) }()
	// Shutdown has begun with the limiter paused once it returned or sent
	// its deregister; the limiter then grants again (a retry, if the
	// first request's confirmation failed, may go).
	returned := false
	subscribertest.Eventually(t, e2eTimeout, "Shutdown to return or send its deregister", func() bool {
		select {
		case err = <-done:
			returned = true
			return true
		default:
			return srv.Stats().Requests[nacostest.RequestInstance] > before
		}
	})
	lim.SetBurst(10)
	if !returned {
		err = <-done
	}
	if err != nil {
		t.Fatalf("Shutdown = %v, want nil: the deregister's first request asks no gate", err)
	}
	if n := len(srv.Instances("", "", "orders")); n != 0 {
		t.Fatalf("the server lists %d instances after Shutdown, want 0", n)
	}
}
