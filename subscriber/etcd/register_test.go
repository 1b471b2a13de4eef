package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// fastRegister makes lease losses visible within seconds.
var fastRegister = fastRegisterWith()

// fastRegisterWith is fastRegister with the registration's events
// observed by opts (rebound.WithObserver).
func fastRegisterWith(opts ...rebound.Option) []etcdreg.Option {
	return []etcdreg.Option{
		etcdreg.WithTTL(2 * time.Second),
		etcdreg.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}, opts...),
	}
}

// register runs reg and closes the Registration at cleanup.
func register(t testing.TB, reg func() (*etcdreg.Registration, error)) *etcdreg.Registration {
	t.Helper()
	g, err := reg()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	return g
}

func TestRegisterAndDeregister(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	m := newManager(t, newRegistry(t, cli), subscriber.WithEmptyListHold(0))
	var rec recorder
	if _, err := m.Subscribe(context.Background(), orders, rec.listener); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "")

	in := inst("10.0.0.1", 80)
	in.Metadata = map[string]string{"v": "1"}
	g, err := etcdreg.RegisterConcrete(context.Background(), cli, orders, in, fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if want := etcdreg.DefaultPrefix + "/public/DEFAULT_GROUP/orders/10.0.0.1:80"; g.InstanceKey() != want {
		t.Fatalf("Key() = %q, want %q", g.InstanceKey(), want)
	}
	rec.waitLast(t, "10.0.0.1:80")
	got := rec.all()[len(rec.all())-1][0]
	if !got.Ephemeral || got.ID != "10.0.0.1:80" || got.Metadata["v"] != "1" {
		t.Fatalf("registered instance = %+v, want ephemeral with ID 10.0.0.1:80 and its metadata", got)
	}
	resp, err := cli.TimeToLive(context.Background(), g.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if resp.TTL <= 0 || resp.GrantedTTL != 2 {
		t.Fatalf("lease TTL = %d (granted %d), want alive with 2 s", resp.TTL, resp.GrantedTTL)
	}

	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	rec.waitLast(t, "")
	if _, err := cli.TimeToLive(context.Background(), g.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatal(err)
	}
}

func TestRegisterAgainAfterLeaseLoss(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	admin := newClient(t, c)
	m := newManager(t, newRegistry(t, cli), subscriber.WithEmptyListHold(0))
	var rec recorder
	if _, err := m.Subscribe(context.Background(), orders, rec.listener); err != nil {
		t.Fatal(err)
	}
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), fastRegister...)
	})
	rec.waitLast(t, "10.0.0.1:80")

	// Someone revokes the lease: the key goes, and comes back on a new
	// lease.
	first := g.Lease()
	if _, err := admin.Revoke(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second registration", func() bool { return g.Status().Registrations == 2 })
	if g.Lease() == first {
		t.Fatal("registered again on the revoked lease")
	}
	rec.waitLast(t, "10.0.0.1:80")
	assertRealStates(t, rec.all(), "", "10.0.0.1:80", "", "10.0.0.1:80")
}

// TestRegistrationSurvivesRestartAndWipe restarts the cluster (the lease
// survives) and then wipes it (the lease and every key are gone, and the
// revisions start again from 1). The registration puts the instance back
// and the subscription, confirmed by the Manager after the reconnect,
// sees it and a new instance, although the new cluster's revisions are
// below the ones its old watch was waiting for.
func TestRegistrationSurvivesRestartAndWipe(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), fastRegister...)
	})
	rec.waitLast(t, "10.0.0.1:80")
	// Move the revision well ahead of what the wiped cluster will reach.
	for range 20 {
		write(t, "bump the revision", func(ctx context.Context) error {
			_, err := cli.Put(ctx, "/elsewhere", "x")
			return err
		})
	}

	c.Stop()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	put(t, cli, orders, inst("10.0.0.2", 80))
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80")
	if n := g.Status().Registrations; n != 1 {
		t.Fatalf("%d registrations after a restart, want 1 (the lease survives)", n)
	}

	before := sub.Status().TotalAttempts
	if err := c.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	eventually(t, "the registration to register again", func() bool { return g.Status().Registrations == 2 })
	put(t, cli, orders, inst("10.0.0.3", 80))
	rec.waitLast(t, "10.0.0.1:80,10.0.0.3:80")
	if st := sub.Status(); st.TotalAttempts <= before {
		t.Fatalf("status %+v: the subscription was not confirmed again", st)
	}
}

func TestRegisterErrors(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		key  subscriber.Key
		in   subscriber.Instance
		opts []etcdreg.Option
		arg  string
	}{
		{"no service", subscriber.Key{}, inst("10.0.0.1", 80), nil, "key.Service"},
		{"clusters", subscriber.Key{Service: "s", Clusters: []string{"a"}}, inst("10.0.0.1", 80), nil, "key.Clusters"},
		{"no ip", orders, subscriber.Instance{Port: 80}, nil, "inst.IP"},
		{"blank ip", orders, subscriber.Instance{IP: " ", Port: 80}, nil, "inst.IP"},
		{"bad id", orders, subscriber.Instance{ID: "a/b", IP: "10.0.0.1", Port: 80, Weight: 1, Healthy: true, Enabled: true}, nil, "inst.ID"},
		{"port 0", orders, subscriber.Instance{IP: "10.0.0.1"}, nil, "inst.Port"},
		{"port 65536", orders, inst("10.0.0.1", 65536), nil, "inst.Port"},
		{"bad ttl", orders, inst("10.0.0.1", 80), []etcdreg.Option{etcdreg.WithTTL(time.Millisecond)}, "d"},
		{"bad prefix", orders, inst("10.0.0.1", 80), []etcdreg.Option{etcdreg.WithPrefix("/x/")}, "prefix"},
		{"invalid policy", orders, inst("10.0.0.1", 80), []etcdreg.Option{etcdreg.WithPolicy(rebound.Policy{Multiplier: 0.5})}, "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := etcdreg.RegisterConcrete(ctx, cli, tc.key, tc.in, tc.opts...)
			var ae *rebound.ArgumentError
			if g != nil || !errors.As(err, &ae) || ae.Arg != tc.arg {
				t.Fatalf("Register = %v, %v; want an ArgumentError naming %s", g, err, tc.arg)
			}
		})
	}

	t.Run("cluster down", func(t *testing.T) {
		c.Stop()
		defer func() {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}()
		down := newClient(t, c)
		g, err := etcdreg.RegisterConcrete(ctx, down, orders, inst("10.0.0.1", 80), etcdreg.WithAttemptTimeout(500*time.Millisecond))
		if g != nil || err == nil || !strings.HasPrefix(err.Error(), "etcd: grant ") || rebound.IsPermanent(err) {
			t.Fatalf("Register = %v, %v; want a transient error of the grant", g, err)
		}
	})
}

// TestRegistrationStatusHooksAndUpdate: the Registration reports the
// subscriber.Registration states and requests through its hooks, Update
// changes the registered value on the same lease, and Update after
// Shutdown matches rebound.ErrClosed.
func TestRegistrationStatusHooksAndUpdate(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	var (
		mu     sync.Mutex
		states []string
		ops    []string
	)
	hooks := registrationHooks{
		StateChanged: func(sc regStateChange) {
			mu.Lock()
			states = append(states, sc.From.String()+">"+sc.To.String())
			mu.Unlock()
		},
		Attempted: func(a regAttempt) {
			mu.Lock()
			ops = append(ops, a.Op)
			mu.Unlock()
		},
	}
	in := inst("10.0.0.1", 80)
	g, err := etcdreg.RegisterConcrete(context.Background(), cli, orders, in,
		fastRegisterWith(rebound.WithObserver(hooks))...)
	if err != nil {
		t.Fatal(err)
	}
	st := g.Status()
	if st.State != subscriber.RegistrationRegistered || st.Registrations != 1 || st.Registry != "etcd" ||
		st.Key.Service != "orders" || !st.Instance.Ephemeral || g.Key().Service != "orders" {
		t.Fatalf("Status() = %+v, want registered once, etcd, orders, ephemeral", st)
	}
	lease := g.Lease()

	up := in
	up.Weight = 0
	up.Metadata = map[string]string{"v": "2"}
	if err := g.Update(context.Background(), up); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(context.Background(), g.InstanceKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != lease {
		t.Fatalf("after Update: %v, want the key on lease %x", resp.Kvs, lease)
	}
	got, err := etcdreg.DecodeInstance("10.0.0.1:80", resp.Kvs[0].Value)
	if err != nil || got.Metadata["v"] != "2" || got.Weight != 0 {
		t.Fatalf("after Update the value decodes to %+v (%v), want weight 0 and v=2", got, err)
	}
	if g.Instance().Metadata["v"] != "2" {
		t.Fatalf("Instance() = %+v, want the updated one", g.Instance())
	}
	other := inst("10.0.0.2", 80)
	if err := g.Update(context.Background(), other); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("Update to another address = %v, want ErrInvalidArgument", err)
	}

	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(context.Background(), up); !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("Update after Shutdown = %v, want rebound.ErrClosed", err)
	}
	if st := g.Status(); st.State != subscriber.RegistrationStopped {
		t.Fatalf("State after Shutdown = %v, want stopped", st.State)
	}
	mu.Lock()
	defer mu.Unlock()
	wantStates := "RegistrationState(0)>registering registering>registered registered>deregistering deregistering>stopped"
	if got := strings.Join(states, " "); got != wantStates {
		t.Fatalf("state changes = %q, want %q", got, wantStates)
	}
	if got := strings.Join(ops, " "); got != "register update deregister" {
		t.Fatalf("attempts = %q, want register update deregister", got)
	}
}
