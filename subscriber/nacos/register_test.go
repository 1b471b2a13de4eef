package nacos_test

import (
	"context"
	"errors"
	"math"
	"strings"
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

// fastRegister makes repairs visible within a second or two.
var fastRegister = fastRegisterWith()

// fastRegisterWith is fastRegister with opts (the registration's
// observers) in its WithPolicy.
func fastRegisterWith(opts ...rebound.Option) []nacos.Option {
	return []nacos.Option{
		nacos.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, opts...),
		nacos.WithRedoGrace(300 * time.Millisecond),
	}
}

func inst(ip string, port uint64) subscriber.Instance {
	return subscriber.Instance{IP: ip, Port: port, Weight: 1, Healthy: true, Enabled: true,
		Metadata: map[string]string{"v": "1"}}
}

// listed reports whether srv lists ip:port in service.
func listed(srv *nacostest.Server, service, ip string, port uint64) bool {
	for _, in := range srv.Instances("", "", service) {
		if in.Ip == ip && in.Port == port {
			return true
		}
	}
	return false
}

func mustRegisterNacos(t *testing.T, c naming_client.INamingClient, key subscriber.Key, inst subscriber.Instance, opts ...nacos.Option) subscriber.Registration {
	t.Helper()
	g, err := nacos.Register(context.Background(), c, key, inst, opts...)
	if err != nil {
		t.Fatalf("Register(%v, %s:%d): %v", key, inst.IP, inst.Port, err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func TestRegisterListsAndShutdownRemoves(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	ins := srv.Instances("", "", "orders")
	if len(ins) != 1 || ins[0].Ip != "10.0.0.1" || ins[0].Port != 8080 || !ins[0].Ephemeral || !ins[0].Enable || ins[0].Metadata["v"] != "1" {
		t.Fatalf("server lists %+v, want the ephemeral, enabled instance 10.0.0.1:8080 with its metadata", ins)
	}
	st := g.Status()
	if st.State != subscriber.RegistrationRegistered || st.Registrations != 1 || st.Registry != "nacos" || !g.Instance().Ephemeral {
		t.Fatalf("Status = %+v, want registered once", st)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("Shutdown returned nil but the server lists the instance")
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
	if st := g.Status(); st.State != subscriber.RegistrationStopped {
		t.Fatalf("State after Shutdown = %v", st.State)
	}
}

// TestRegisterRejectedIsAnError: a register request rejected in the
// handler's own response type (TPS control), which the SDK reports as
// success, is ErrRejected, and nothing is left registered.
func TestRegisterRejectedIsAnError(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	// The SDK's own answer, for the record: ok false, err nil.
	if err := srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{Fraction: 1}); err != nil {
		t.Fatal(err)
	}
	ok, err := c.RegisterInstance(vo.RegisterInstanceParam{ServiceName: "probe", Ip: "10.0.0.9", Port: 1, Enable: true, Ephemeral: true})
	if ok || err != nil {
		t.Fatalf("SDK RegisterInstance under rejection = %v, %v; this test assumes false, nil", ok, err)
	}
	_, err = nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
	if !errors.Is(err, nacos.ErrRejected) || !strings.HasPrefix(err.Error(), "nacos: register ") {
		t.Fatalf("Register under rejection = %v, want the register error wrapping ErrRejected", err)
	}
	if err := srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{}); err != nil {
		t.Fatal(err)
	}
	if listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("the rejected instance is listed")
	}
	// The slot was given back: registering the service again works.
	mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), fastRegister...)
}

// TestRegisterConflict: a second registration of one service from one
// client is refused (Nacos would replace the first), never silent; once
// the first stops, it is allowed.
func TestRegisterConflict(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	key := subscriber.Key{Service: "orders"}
	g := mustRegisterNacos(t, c, key, inst("10.0.0.1", 8080), fastRegister...)
	_, err := nacos.Register(context.Background(), c, subscriber.Key{Group: "DEFAULT_GROUP", Service: "orders"}, inst("10.0.0.1", 8081), fastRegister...)
	var ae *rebound.ArgumentError
	if !errors.Is(err, nacos.ErrConflict) || !errors.As(err, &ae) || ae.Arg != "key" {
		t.Fatalf("second Register = %v, want an ArgumentError on key wrapping ErrConflict", err)
	}
	if ins := srv.Instances("", "", "orders"); len(ins) != 1 || ins[0].Port != 8080 {
		t.Fatalf("server lists %+v, want the first instance only", ins)
	}
	// Another service from the same client is fine.
	mustRegisterNacos(t, c, subscriber.Key{Service: "billing"}, inst("10.0.0.1", 8081), fastRegister...)
	// Another client may register the same service.
	mustRegisterNacos(t, newClient(t, srv), key, inst("10.0.0.2", 8080), fastRegister...)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustRegisterNacos(t, c, key, inst("10.0.0.1", 8082), fastRegister...)
}

// TestRegisterRepairsForgottenInstance: a server that loses the client's
// instances without dropping its connection (a failed Distro sync) is
// found by the periodic check and repaired.
func TestRegisterRepairsForgottenInstance(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		append(fastRegister, nacos.WithCheckInterval(200*time.Millisecond))...)
	// The first check opens the Registration's query connection.
	subscribertest.Eventually(t, e2eTimeout, "a first check", func() bool {
		return srv.Stats().Requests[nacostest.RequestServiceQuery] > 0
	})
	conns := srv.Stats().ConnectionsOpened
	// Twice: the SDK's redo of its first connection event can come after
	// Register's request and bring the instance back once on its own.
	for range 2 {
		if n := srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080); n != 1 {
			t.Fatalf("ForgetClientInstances = %d", n)
		}
		subscribertest.Eventually(t, e2eTimeout, "the instance to be registered again", func() bool {
			return listed(srv, "orders", "10.0.0.1", 8080)
		})
	}
	subscribertest.Eventually(t, e2eTimeout, "the repair to be counted, registered", func() bool {
		st := g.Status()
		return st.Repairs >= 1 && st.State == subscriber.RegistrationRegistered
	})
	if st := g.Status(); st.Repairs < 1 || st.Repairs > 2 || st.State != subscriber.RegistrationRegistered {
		t.Fatalf("Status = %+v, want registered after one or two repairs", st)
	}
	if st := srv.Stats(); st.ConnectionsOpened != conns {
		t.Fatalf("connections opened %d -> %d: the repair must not need a reconnect", conns, st.ConnectionsOpened)
	}
}

func TestRegistrationUpdate(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	in := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in, fastRegister...)
	in.Weight, in.Metadata = 0, map[string]string{"v": "2"}
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	// The SDK's start-up redo may re-send the old instance after the
	// Update (its copy taken before): the check after the grace repairs it.
	subscribertest.Eventually(t, e2eTimeout, "the server to list weight 0 and v=2", func() bool {
		ins := srv.Instances("", "", "orders")
		return len(ins) == 1 && ins[0].Weight == 0 && ins[0].Metadata["v"] == "2"
	})
	// A stale copy put back later (as a racing redo would) is registered
	// over by the check that follows an Update.
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	stale := srv.Instances("", "", "orders")[0]
	stale.Weight, stale.Metadata = 1, map[string]string{"v": "1"}
	if err := srv.RegisterInstance("", "", "orders", stale); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the stale copy to be registered over", func() bool {
		ins := srv.Instances("", "", "orders")
		return len(ins) == 1 && ins[0].Weight == 0 && ins[0].Metadata["v"] == "2"
	})

	if got := g.Instance(); got.Weight != 0 || got.Metadata["v"] != "2" {
		t.Fatalf("Instance() = %+v", got)
	}
	other := in
	other.Port = 9
	if err := g.Update(context.Background(), other); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("Update to another port = %v, want ErrInvalidArgument", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(context.Background(), in); !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("Update after Close = %v, want rebound.ErrClosed", err)
	}
	// Close leaves the ephemeral instance to the connection.
	if !listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("Close deregistered the instance")
	}
}

func TestRegisterBadInput(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	var typedNil *naming_client.NamingClient
	ok := inst("10.0.0.1", 8080)
	with := func(f func(*subscriber.Instance)) subscriber.Instance {
		in := inst("10.0.0.1", 8080)
		f(&in)
		return in
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		client naming_client.INamingClient
		key    subscriber.Key
		inst   subscriber.Instance
		opts   []nacos.Option
		arg    string
	}{
		{"nil ctx", nil, c, subscriber.Key{Service: "s"}, ok, nil, "ctx"},
		{"nil client", context.Background(), nil, subscriber.Key{Service: "s"}, ok, nil, "client"},
		{"typed-nil client", context.Background(), typedNil, subscriber.Key{Service: "s"}, ok, nil, "client"},
		{"empty service", context.Background(), c, subscriber.Key{}, ok, nil, "key.Service"},
		{"@@ in service", context.Background(), c, subscriber.Key{Service: "a@@b"}, ok, nil, "key"},
		{"@@ in group", context.Background(), c, subscriber.Key{Group: "g@@", Service: "s"}, ok, nil, "key"},
		{"clusters", context.Background(), c, subscriber.Key{Service: "s", Clusters: []string{"c"}}, ok, nil, "key.Clusters"},
		{"other namespace", context.Background(), c, subscriber.Key{Namespace: "other", Service: "s"}, ok, nil, "key.Namespace"},
		{"zero instance", context.Background(), c, subscriber.Key{Service: "s"}, subscriber.Instance{}, nil, "inst.IP"},
		{"blank IP", context.Background(), c, subscriber.Key{Service: "s"}, with(func(i *subscriber.Instance) { i.IP = " \t" }), nil, "inst.IP"},
		{"port 0", context.Background(), c, subscriber.Key{Service: "s"}, with(func(i *subscriber.Instance) { i.Port = 0 }), nil, "inst.Port"},
		{"port 65536", context.Background(), c, subscriber.Key{Service: "s"}, with(func(i *subscriber.Instance) { i.Port = 65536 }), nil, "inst.Port"},
		{"NaN weight", context.Background(), c, subscriber.Key{Service: "s"}, with(func(i *subscriber.Instance) { i.Weight = math.NaN() }), nil, "inst.Weight"},
		{"bad policy", context.Background(), c, subscriber.Key{Service: "s"}, ok, []nacos.Option{nacos.WithPolicy(rebound.Policy{Multiplier: 0.5})}, "p"},
		{"bad grace", context.Background(), c, subscriber.Key{Service: "s"}, ok, []nacos.Option{nacos.WithRedoGrace(0)}, "d"},
		{"bad check", context.Background(), c, subscriber.Key{Service: "s"}, ok, []nacos.Option{nacos.WithCheckInterval(-time.Second)}, "d"},
		{"option of New", context.Background(), c, subscriber.Key{Service: "s"}, ok, []nacos.Option{nacos.WithPollInterval(time.Second, time.Second)}, "opts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := nacos.Register(tc.ctx, tc.client, tc.key, tc.inst, tc.opts...)
			var ae *rebound.ArgumentError
			if g != nil || !errors.As(err, &ae) || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Arg != tc.arg {
				t.Fatalf("Register = %v, %v; want an ArgumentError naming %q", g, err, tc.arg)
			}
		})
	}
	if n := len(srv.Instances("", "", "s")); n != 0 {
		t.Fatalf("bad input registered %d instances", n)
	}
}
