package subscribertest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// RegistrationHarness connects the Registration conformance suite
// (RunRegistration) to one adapter's provider side. Every function field
// is required.
//
// RunRegistration calls the functions from the test goroutine, one at a
// time. Each may fail the test (t.Fatal) when the registry does not do
// what is asked within a bounded time.
type RegistrationHarness struct {
	// NewClient returns a register function bound to a new client of the
	// backing registry (the adapter's Register with options that make
	// repairs take at most a few seconds), and a function that closes the
	// client. RunRegistration stops every Registration before it calls
	// close, exactly once.
	NewClient func(t *testing.T) (register func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error), close func())

	// NewRegistry returns a consumer-side adapter with its own client, and
	// a function that closes both (as Harness.NewRegistry).
	NewRegistry func(t *testing.T) (reg subscriber.Registry, close func())

	// Listed reports whether the registry holds inst (by IP and Port) as
	// an instance of key's service, read from the registry itself (the
	// server's state, not a client's cache). The registry is running.
	Listed func(t *testing.T, key subscriber.Key, inst subscriber.Instance) bool

	// Stop stops the backing registry as a crash would, and returns once
	// it is down. Start starts it again on the same address and returns
	// once it serves clients. A registry may come back with its data
	// (etcd) or empty (a Nacos restart loses every ephemeral instance):
	// the Registrations must be listed again either way, by themselves.
	Stop  func(t *testing.T)
	Start func(t *testing.T)

	// Lose makes the running registry lose the registered instance inst
	// of key without closing the client's connection or telling it (for
	// Nacos: a node that lost a client's instances; for etcd: the key
	// deleted). Optional: the Lost subtest is skipped without it. The
	// Registration must notice and register again within the timeout
	// (the harness's register options set how often it checks).
	Lose func(t *testing.T, key subscriber.Key, inst subscriber.Instance)

	// Leaks lists the goroutines the registry's client library leaves
	// behind by design (as Harness.Leaks).
	Leaks []goleak.Option

	// Timeout bounds each wait for a condition. Optional: 0 means
	// WaitTimeout.
	Timeout time.Duration
}

// RunRegistration runs the conformance suite for subscriber.Registration
// against the adapter behind h: the same behavioural tests for every
// adapter. The registry must be running when it starts; it leaves it
// running. Subtests:
//
//   - Register: Register returns a registered Registration (Status,
//     Key, Instance); the registry lists the instance and a consumer
//     (a Manager over NewRegistry) receives it.
//   - Update: an Update to weight 0 and new metadata reaches the registry
//     and the consumer; an Update to another address is a
//     *rebound.ArgumentError.
//   - Restart: after a crash and a restart the instance is listed again
//     and the Registration is registered again; the consumer gets it back.
//   - Lost (with h.Lose): the registry loses the instance without any
//     connection change; the Registration registers it again (one repair
//     at least, Status registered).
//   - ShutdownNoGhost: Shutdown returns nil only once the registry no
//     longer lists the instance; after a later restart, once another
//     Registration of the same client is listed again, the shut one is
//     still not listed.
//   - Close: Close is idempotent, leaves the Registration stopped (Update
//     returns an error matching
//     rebound.ErrClosed), and no goroutine behind once the client is
//     closed (except h.Leaks).
//   - BadInput: the zero Instance, an empty IP, a port of 0 and a port
//     above 65535 are each a *rebound.ArgumentError, and nothing is
//     listed.
func RunRegistration(t *testing.T, h RegistrationHarness) {
	t.Helper()
	if h.NewClient == nil || h.NewRegistry == nil || h.Listed == nil || h.Stop == nil || h.Start == nil {
		t.Fatal("subscribertest.RunRegistration: every function of the RegistrationHarness must be set")
	}
	s := &regSuite{h: h, timeout: h.Timeout}
	if s.timeout <= 0 {
		s.timeout = WaitTimeout
	}
	t.Run("Register", s.register)
	t.Run("Update", s.update)
	t.Run("Restart", s.restart)
	t.Run("Lost", s.lost)
	t.Run("ShutdownNoGhost", s.shutdownNoGhost)
	t.Run("Close", s.close)
	t.Run("BadInput", s.badInput)
}

type regSuite struct {
	h       RegistrationHarness
	timeout time.Duration
}

type regFunc = func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error)

// client makes a client closed at cleanup, after the Registrations made
// through the returned function are closed.
func (s *regSuite) client(t *testing.T) regFunc {
	t.Helper()
	reg, closeClient := s.h.NewClient(t)
	var regs []subscriber.Registration
	t.Cleanup(func() {
		for _, g := range regs {
			_ = g.Close()
		}
		closeClient()
	})
	return func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
		g, err := reg(ctx, key, inst)
		if err == nil {
			regs = append(regs, g)
		}
		return g, err
	}
}

func (s *regSuite) mustRegister(t *testing.T, reg regFunc, key subscriber.Key, inst subscriber.Instance) subscriber.Registration {
	t.Helper()
	g, err := reg(context.Background(), key, inst)
	if err != nil {
		t.Fatalf("Register(%v, %s): %v", key, Addrs([]subscriber.Instance{inst}), err)
	}
	return g
}

// consumer subscribes a Manager over a new consumer-side adapter to key.
func (s *regSuite) consumer(t *testing.T, key subscriber.Key) *recorder {
	t.Helper()
	reg, closeReg := s.h.NewRegistry(t)
	m, err := subscriber.New(reg, subscriber.WithPolicy(Policy), subscriber.WithEmptyListHold(0))
	if err != nil {
		closeReg()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		closeReg()
	})
	rec := &recorder{timeout: s.timeout}
	if _, err := m.Subscribe(context.Background(), key, rec.listen); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (s *regSuite) waitListed(t *testing.T, key subscriber.Key, inst subscriber.Instance, want bool) {
	t.Helper()
	what := "the registry to list " + Addrs([]subscriber.Instance{inst})
	if !want {
		what = "the registry to stop listing " + Addrs([]subscriber.Instance{inst})
	}
	eventually(t, s.timeout, what, func() bool { return s.h.Listed(t, key, inst) == want })
}

func (s *regSuite) waitState(t *testing.T, g subscriber.Registration, want subscriber.RegistrationState) {
	t.Helper()
	eventually(t, s.timeout, "the registration to be "+want.String(), func() bool { return g.Status().State == want })
}

func regKey(t *testing.T) subscriber.Key {
	name := t.Name()
	name = name[strings.LastIndex(name, "/")+1:]
	return subscriber.Key{Service: "registration-" + strings.ToLower(name)}
}

func (s *regSuite) register(t *testing.T) {
	k := regKey(t)
	rec := s.consumer(t, k)
	reg := s.client(t)
	in := Instance("10.9.0.1", 8080)
	in.Metadata = map[string]string{"v": "1"}
	g := s.mustRegister(t, reg, k, in)
	st := g.Status()
	if st.State != subscriber.RegistrationRegistered || st.Registrations < 1 || st.Key.Service != k.Service {
		t.Fatalf("Status after Register = %+v, want registered", st)
	}
	if got := g.Key(); got.Service != k.Service {
		t.Fatalf("Key() = %v, want %v", got, k)
	}
	if got := g.Instance(); got.IP != in.IP || got.Port != in.Port || !got.Ephemeral || got.Metadata["v"] != "1" {
		t.Fatalf("Instance() = %+v, want %s, ephemeral, with its metadata", got, Addrs([]subscriber.Instance{in}))
	}
	if !s.h.Listed(t, k, in) {
		t.Fatal("Register returned but the registry does not list the instance")
	}
	rec.wait(t, "10.9.0.1:8080")
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "")
}

func (s *regSuite) update(t *testing.T) {
	k := regKey(t)
	rec := s.consumer(t, k)
	reg := s.client(t)
	in := Instance("10.9.0.2", 8080)
	g := s.mustRegister(t, reg, k, in)
	rec.wait(t, "10.9.0.2:8080")
	in.Weight, in.Metadata = 0, map[string]string{"v": "2"}
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if got := g.Instance(); got.Weight != 0 || got.Metadata["v"] != "2" {
		t.Fatalf("Instance() after Update = %+v", got)
	}
	eventually(t, s.timeout, "the consumer to see weight 0 and v=2", func() bool {
		l := rec.lastList()
		return len(l) == 1 && l[0].Weight == 0 && l[0].Metadata["v"] == "2"
	})
	other := in
	other.Port = 8081
	var ae *rebound.ArgumentError
	if err := g.Update(context.Background(), other); !errors.As(err, &ae) {
		t.Fatalf("Update to another address = %v, want a *rebound.ArgumentError", err)
	}
	// The trap Register refuses (a literal with only the address and the
	// new metadata) is refused by Update too.
	zero := subscriber.Instance{IP: in.IP, Port: in.Port, Cluster: in.Cluster, Metadata: map[string]string{"v": "3"}}
	if err := g.Update(context.Background(), zero); !errors.As(err, &ae) ||
		!strings.Contains(err.Error(), "inst.Enabled, inst.Healthy, inst.Weight") {
		t.Fatalf("Update to Enabled, Healthy and Weight all zero = %v, want a *rebound.ArgumentError naming them", err)
	}
}

func (s *regSuite) restart(t *testing.T) {
	k := regKey(t)
	rec := s.consumer(t, k)
	reg := s.client(t)
	in := Instance("10.9.0.3", 8080)
	g := s.mustRegister(t, reg, k, in)
	rec.wait(t, "10.9.0.3:8080")
	s.h.Stop(t)
	s.h.Start(t)
	s.waitListed(t, k, in, true)
	s.waitState(t, g, subscriber.RegistrationRegistered)
	rec.wait(t, "10.9.0.3:8080")
	if !s.h.Listed(t, k, in) {
		t.Fatal("the registry does not list the instance after the restart")
	}
}

func (s *regSuite) lost(t *testing.T) {
	if s.h.Lose == nil {
		t.Skip("the harness cannot make the registry lose an instance")
	}
	k := regKey(t)
	reg := s.client(t)
	in := Instance("10.9.0.7", 8080)
	g := s.mustRegister(t, reg, k, in)
	// Twice: a client may re-send a registration once on its own just
	// after it connected (nacos-sdk-go's first connection event can come
	// after Register's request, and its redo then sends it again), which
	// may bring the instance back the first time; the second loss is the
	// Registration's to repair. (A fast repair may already have put it
	// back when Lose returns.)
	for range 2 {
		s.h.Lose(t, k, in)
		s.waitListed(t, k, in, true)
	}
	eventually(t, s.timeout, "a repair to be counted", func() bool { return g.Status().Repairs >= 1 })
	s.waitState(t, g, subscriber.RegistrationRegistered)
}

func (s *regSuite) shutdownNoGhost(t *testing.T) {
	k := regKey(t)
	other := subscriber.Key{Service: k.Service + "-other"}
	reg := s.client(t)
	in := Instance("10.9.0.4", 8080)
	stay := Instance("10.9.0.4", 8081)
	g := s.mustRegister(t, reg, k, in)
	h := s.mustRegister(t, reg, other, stay)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.h.Listed(t, k, in) {
		t.Fatal("Shutdown returned nil but the registry lists the instance")
	}
	if st := g.Status(); st.State != subscriber.RegistrationStopped {
		t.Fatalf("State after Shutdown = %v, want stopped", st.State)
	}
	s.h.Stop(t)
	s.h.Start(t)
	// The other registration back and registered: the client has
	// reconnected (and redone whatever it redoes).
	s.waitListed(t, other, stay, true)
	s.waitState(t, h, subscriber.RegistrationRegistered)
	if s.h.Listed(t, k, in) {
		t.Fatal("the instance Shutdown deregistered came back after a restart (a ghost)")
	}
}

func (s *regSuite) close(t *testing.T) {
	k := regKey(t)
	ignore := goleak.IgnoreCurrent()
	reg, closeClient := s.h.NewClient(t)
	in := Instance("10.9.0.5", 8080)
	g, err := reg(context.Background(), k, in)
	if err != nil {
		closeClient()
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if st := g.Status(); st.State != subscriber.RegistrationStopped {
		t.Fatalf("State after Close = %v, want stopped", st.State)
	}
	if err := g.Update(context.Background(), in); !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("Update after Close = %v, want rebound.ErrClosed", err)
	}
	closeClient()
	if err := FindLeaks(s.timeout, append([]goleak.Option{ignore}, s.h.Leaks...)...); err != nil {
		t.Fatalf("goroutines left after Close and closing the client: %v", err)
	}
}

func (s *regSuite) badInput(t *testing.T) {
	k := regKey(t)
	reg := s.client(t)
	for _, tc := range []struct {
		name string
		inst subscriber.Instance
		arg  string
	}{
		{"zero instance", subscriber.Instance{}, "inst.IP"},
		{"empty IP", subscriber.Instance{Port: 80, Weight: 1, Enabled: true}, "inst.IP"},
		{"Enabled, Healthy and Weight untouched", subscriber.Instance{IP: "10.9.0.6", Port: 80}, "inst.Enabled, inst.Healthy, inst.Weight"},
		{"port 0", Instance("10.9.0.6", 0), "inst.Port"},
		{"port 65536", Instance("10.9.0.6", 65536), "inst.Port"},
		{"blank IP", Instance(" ", 80), "inst.IP"},
		{"negative weight", withWeight(Instance("10.9.0.6", 80), -1), "inst.Weight"},
		{"NaN weight", withWeight(Instance("10.9.0.6", 80), math.NaN()), "inst.Weight"},
		{"infinite weight", withWeight(Instance("10.9.0.6", 80), math.Inf(1)), "inst.Weight"},
	} {
		g, err := reg(context.Background(), k, tc.inst)
		var ae *rebound.ArgumentError
		if g != nil || !errors.As(err, &ae) || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Arg != tc.arg {
			t.Errorf("%s: Register = %v, %v; want a *rebound.ArgumentError naming %q", tc.name, g, err, tc.arg)
		}
	}
	if s.h.Listed(t, k, Instance("10.9.0.6", 0)) || s.h.Listed(t, k, Instance("10.9.0.6", 65536)) || s.h.Listed(t, k, Instance("10.9.0.6", 80)) {
		t.Fatal("bad input was registered")
	}
}

func withWeight(in subscriber.Instance, w float64) subscriber.Instance {
	in.Weight = w
	return in
}
