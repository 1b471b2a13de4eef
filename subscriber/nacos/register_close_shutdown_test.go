package nacos_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestShutdownAfterCloseSparesTheNextRegistration: Close gives the
// service's slot on the client back, so another Registration of the
// service may follow on the same client (Nacos then holds the new
// instance in place of the old one). A Shutdown of the closed
// Registration must not deregister the new one: Nacos' deregister
// removes the connection's instance of the service whatever address it
// names, and the SDK drops its redo entry of the service.
func TestShutdownAfterCloseSparesTheNextRegistration(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	key := subscriber.Key{Service: "orders"}
	old := mustRegisterNacos(t, c, key, inst("10.0.0.1", 8080), fastRegister...)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// The SDK's redo of its first connection event may re-send the
	// first instance after the second Register (its copy taken before):
	// the second one's periodic check repairs that.
	next := mustRegisterNacos(t, c, key, inst("10.0.0.2", 8080), append(fastRegister, nacos.WithCheckInterval(50*time.Millisecond))...)
	subscribertest.Eventually(t, e2eTimeout, "the second registration to be listed", func() bool {
		return listed(srv, "orders", "10.0.0.2", 8080) && next.Status().State == subscriber.RegistrationRegistered
	})
	repairs := next.Status().Repairs
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown of the closed registration: %v", err)
	}
	if !listed(srv, "orders", "10.0.0.2", 8080) || next.Status().Repairs != repairs {
		t.Fatalf("Shutdown of the closed registration deregistered the next one (server lists %+v; its status %+v)",
			srv.Instances("", "", "orders"), next.Status())
	}
}

// TestShutdownAfterCloseLeavesNoQueryConnection: a Shutdown after Close
// checks the server's list on the client's query connection; the
// connection must be closed again when it is done (it was left open,
// with its goroutines, for the life of the process).
func TestShutdownAfterCloseLeavesNoQueryConnection(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	base := srv.ConnectionCount() // the client's (no query connection yet: no check ran)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("Shutdown returned nil but the server lists the instance")
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.ConnectionCount() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := srv.ConnectionCount(); n > base {
		t.Fatalf("%d connections after Shutdown, want %d (the query connection was left open)", n, base)
	}
}

// TestShutdownRacingUpdatesAndRepairs: Updates and repairs (the server
// forgets the instance again and again) running while Shutdown runs:
// Shutdown returns nil, the server then lists nothing, and no late
// repair or Update brings the instance back.
func TestShutdownRacingUpdatesAndRepairs(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	opts := append([]nacos.Option{nacos.WithCheckInterval(20 * time.Millisecond)}, fastRegister...)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), opts...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			in := g.Instance()
			in.Metadata = map[string]string{"v": strconv.Itoa(i)}
			_ = g.Update(context.Background(), in)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080)
		}
	})
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := g.Shutdown(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	for range 20 {
		if listed(srv, "orders", "10.0.0.1", 8080) {
			t.Fatal("the instance is listed after Shutdown returned nil")
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestShutdownRacingClose: Shutdown and Close at once, in either order:
// both return, the Registration ends stopped with its slot given back
// (the service can be registered again on the client), and the server
// lists nothing once Shutdown returned nil.
func TestShutdownRacingClose(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	key := subscriber.Key{Service: "orders"}
	for i := range 10 {
		g := mustRegisterNacos(t, c, key, inst("10.0.0.1", 8080), fastRegister...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		var serr error
		wg.Go(func() { serr = g.Shutdown(ctx) })
		wg.Go(func() { _ = g.Close() })
		wg.Wait()
		cancel()
		if st := g.Status(); st.State != subscriber.RegistrationStopped {
			t.Fatalf("round %d: state %v after Shutdown and Close", i, st.State)
		}
		if serr == nil && listed(srv, "orders", "10.0.0.1", 8080) {
			t.Fatalf("round %d: Shutdown returned nil but the server lists the instance", i)
		}
	}
}

// TestShutdownAfterCloseReportsDeregistering: a Shutdown after Close
// that deregisters reports it (stopped, deregistering, stopped), as any
// Shutdown does. (Close's stopped was final to the state tracker: the
// observers never heard of the deregistration.)
func TestShutdownAfterCloseReportsDeregistering(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	var mu sync.Mutex
	var states []string
	obs := rebound.WithObserver(registrationHooks{StateChanged: func(ch regStateChange) {
		mu.Lock()
		states = append(states, ch.To.String())
		mu.Unlock()
	}})
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegisterWith(obs)...)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("Shutdown after Close returned nil but the server lists the instance")
	}
	mu.Lock()
	got := strings.Join(states, " ")
	mu.Unlock()
	if want := "registering registered stopped deregistering stopped"; got != want {
		t.Fatalf("states %q, want %q", got, want)
	}
	if st := g.Status(); st.State != subscriber.RegistrationStopped {
		t.Fatalf("state %v after Shutdown", st.State)
	}
}
