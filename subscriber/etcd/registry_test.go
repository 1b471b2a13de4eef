package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

var orders = subscriber.Key{Service: "orders"}

func TestSubscribeDeliversChanges(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	put(t, cli, orders, inst("10.0.0.1", 80))
	// Instances of another service, of a service whose name extends this
	// one, and keys below an instance are not part of the list.
	put(t, cli, subscriber.Key{Service: "orders-v2"}, inst("10.9.9.9", 80))
	put(t, cli, subscriber.Key{Service: "payments"}, inst("10.9.9.8", 80))
	write(t, "put a deeper key", func(ctx context.Context) error {
		_, err := cli.Put(ctx, etcdreg.DefaultPrefix+"/public/DEFAULT_GROUP/orders/x/y", "{}")
		return err
	})

	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	<-sub.Ready()
	rec.waitLast(t, "10.0.0.1:80")

	put(t, cli, orders, inst("10.0.0.2", 80))
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80")
	del(t, cli, orders, "10.0.0.1:80")
	rec.waitLast(t, "10.0.0.2:80")

	// Several changes in one transaction arrive as one list.
	write(t, "txn", func(ctx context.Context) error {
		k3, _ := etcdreg.InstanceKey(etcdreg.DefaultPrefix, orders, "10.0.0.3:80")
		k4, _ := etcdreg.InstanceKey(etcdreg.DefaultPrefix, orders, "10.0.0.4:80")
		v3, _ := etcdreg.EncodeInstance(inst("10.0.0.3", 80))
		v4, _ := etcdreg.EncodeInstance(inst("10.0.0.4", 80))
		_, err := cli.Txn(ctx).Then(clientv3.OpPut(k3, string(v3)), clientv3.OpPut(k4, string(v4))).Commit()
		return err
	})
	rec.waitLast(t, "10.0.0.2:80,10.0.0.3:80,10.0.0.4:80")

	// Every list was a real state of the service, in order, each once.
	want := []string{"10.0.0.1:80", "10.0.0.1:80,10.0.0.2:80", "10.0.0.2:80", "10.0.0.2:80,10.0.0.3:80,10.0.0.4:80"}
	var got []string
	for _, l := range rec.all() {
		got = append(got, addrs(l))
	}
	if !equalStrings(got, want) {
		t.Fatalf("lists delivered:\n%q\nwant\n%q", got, want)
	}
	if st := sub.Status(); st.State != subscriber.StateSubscribed || st.TotalAttempts != 1 {
		t.Fatalf("status = %+v, want subscribed after 1 attempt", st)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSubscribeFiltersClusters(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	a := inst("10.0.0.1", 80)
	a.Cluster = "" // stored as DEFAULT
	b := inst("10.0.0.2", 80)
	b.Cluster = "east"
	put(t, cli, orders, a)
	put(t, cli, orders, b)

	m := newManager(t, newRegistry(t, cli))
	var def, east, all recorder
	for _, s := range []struct {
		clusters []string
		rec      *recorder
	}{{[]string{etcdreg.DefaultCluster}, &def}, {[]string{"east"}, &east}, {nil, &all}} {
		k := orders
		k.Clusters = s.clusters
		if _, err := m.Subscribe(context.Background(), k, s.rec.listener); err != nil {
			t.Fatal(err)
		}
	}
	def.waitLast(t, "10.0.0.1:80")
	east.waitLast(t, "10.0.0.2:80")
	all.waitLast(t, "10.0.0.1:80,10.0.0.2:80")

	c2 := inst("10.0.0.3", 80)
	c2.Cluster = "east"
	put(t, cli, orders, c2)
	east.waitLast(t, "10.0.0.2:80,10.0.0.3:80")
	all.waitLast(t, "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80")
	if n := def.count(); n != 1 {
		t.Fatalf("the DEFAULT subscription got %d lists, want 1 (a change in another cluster is not a change)", n)
	}
}

func TestSubscribeDecodesInstances(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	want := subscriber.Instance{
		ID: "i-1", IP: "10.0.0.1", Port: 8080, Weight: 2.5, Healthy: true, Enabled: true,
		Ephemeral: false, Cluster: "east", Metadata: map[string]string{"zone": "a"},
	}
	put(t, cli, orders, want)
	// A value that is not an instance is skipped, not fatal.
	write(t, "put garbage", func(ctx context.Context) error {
		_, err := cli.Put(ctx, etcdreg.DefaultPrefix+"/public/DEFAULT_GROUP/orders/junk", "not json")
		return err
	})
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	if _, err := m.Subscribe(context.Background(), orders, rec.listener); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:8080")
	got := rec.all()[0][0]
	if got.ID != want.ID || got.Weight != want.Weight || !got.Healthy || !got.Enabled || got.Ephemeral ||
		got.Cluster != "east" || got.Metadata["zone"] != "a" || len(got.Metadata) != 1 {
		t.Fatalf("instance = %+v, want %+v", got, want)
	}
}

func TestSubscribeRejectsBadKeysPermanently(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	r := newRegistry(t, cli)
	for _, k := range []subscriber.Key{
		{Service: ""},
		{Service: "a/b"},
		{Namespace: "x/y", Service: "s"},
		{Group: "g/", Service: "s"},
	} {
		err := r.Subscribe(context.Background(), k, nopSink{})
		if !errors.Is(err, rebound.ErrInvalidArgument) || !rebound.IsPermanent(err) {
			t.Errorf("Subscribe(%+v) = %v, want a permanent error wrapping ErrInvalidArgument", k, err)
		}
	}
	if err := r.Subscribe(context.Background(), orders, nil); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("Subscribe(nil sink) = %v, want ErrInvalidArgument", err)
	}
}

type nopSink struct{}

func (nopSink) Update([]subscriber.Instance) {}
func (nopSink) Resubscribe(error)            {}
func (nopSink) Confirmed(string)             {}

// sinkRecorder is a Sink that records what the adapter sends it.
type sinkRecorder struct {
	updates     chan []subscriber.Instance
	resubscribe chan error
}

func newSinkRecorder() *sinkRecorder {
	return &sinkRecorder{updates: make(chan []subscriber.Instance, 100), resubscribe: make(chan error, 100)}
}

func (s *sinkRecorder) Update(l []subscriber.Instance) { s.updates <- l }
func (s *sinkRecorder) Resubscribe(err error)          { s.resubscribe <- err }
func (s *sinkRecorder) Confirmed(string)               {}

func TestCloseIsPermanent(t *testing.T) {
	c := newCluster(t, 1)
	t.Run("registry", func(t *testing.T) {
		cli := newClient(t, c)
		r := newRegistry(t, cli)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		err := r.Subscribe(context.Background(), orders, nopSink{})
		if !errors.Is(err, rebound.ErrClosed) {
			t.Fatalf("Subscribe after Close = %v, want rebound.ErrClosed", err)
		}
	})
	t.Run("client", func(t *testing.T) {
		cli := newClient(t, c)
		r := newRegistry(t, cli)
		sink := newSinkRecorder()
		if err := r.Subscribe(context.Background(), orders, sink); err != nil {
			t.Fatal(err)
		}
		<-sink.updates
		if err := cli.Close(); err != nil {
			t.Fatal(err)
		}
		// The watch ends and asks for a resubscription, which fails for
		// good.
		select {
		case err := <-sink.resubscribe:
			if !errors.Is(err, rebound.ErrClosed) {
				t.Fatalf("Resubscribe(%v), want rebound.ErrClosed", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("no Resubscribe after the client was closed")
		}
		err := r.Subscribe(context.Background(), orders, sink)
		if !errors.Is(err, rebound.ErrClosed) {
			t.Fatalf("Subscribe after client Close = %v, want rebound.ErrClosed", err)
		}
	})
	t.Run("registry with live subscriptions", func(t *testing.T) {
		cli := newClient(t, c)
		r := newRegistry(t, cli)
		m := newManager(t, r)
		sub, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		<-sub.Ready()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.Done():
		case <-time.After(waitTimeout):
			t.Fatalf("subscription still running after the Registry was closed: %+v", sub.Status())
		}
		if !errors.Is(sub.Err(), rebound.ErrClosed) {
			t.Fatalf("Err = %v, want rebound.ErrClosed", sub.Err())
		}
	})
	t.Run("manager", func(t *testing.T) {
		cli := newClient(t, c)
		m := newManager(t, newRegistry(t, cli))
		if err := cli.Close(); err != nil {
			t.Fatal(err)
		}
		sub, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.Done():
		case <-time.After(waitTimeout):
			t.Fatalf("subscription still running with a closed client: %+v", sub.Status())
		}
		if !errors.Is(sub.Err(), rebound.ErrClosed) {
			t.Fatalf("Err = %v, want rebound.ErrClosed", sub.Err())
		}
	})
}

func TestDownAtStart(t *testing.T) {
	c := newCluster(t, 1)
	c.Stop()
	cli := newClient(t, c)
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "three failed attempts", func() bool { return sub.Status().Attempts >= 3 })
	st := sub.Status()
	if st.State != subscriber.StateRetrying || !errors.Is(st.LastErr, etcdreg.ErrNotConnected) {
		t.Fatalf("status while down = %+v, want retrying with ErrNotConnected", st)
	}
	if rebound.IsPermanent(st.LastErr) {
		t.Fatalf("LastErr %v is permanent", st.LastErr)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	put(t, cli, orders, inst("10.0.0.1", 80))
	select {
	case <-sub.Ready():
	case <-time.After(waitTimeout):
		t.Fatalf("not ready after the cluster started: %+v", sub.Status())
	}
	rec.waitLast(t, "10.0.0.1:80")
}

func TestRestartKeepsSubscription(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	put(t, cli, orders, inst("10.0.0.1", 80))
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:80")

	for i := range 3 {
		before := sub.Status().TotalAttempts
		c.Stop()
		// The connection monitor reports the loss: the subscription is
		// retrying and keeps its list.
		eventually(t, "the subscription to notice the outage", func() bool {
			return sub.Status().State == subscriber.StateRetrying
		})
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the subscription to be confirmed again", func() bool {
			st := sub.Status()
			return st.State == subscriber.StateSubscribed && st.TotalAttempts > before
		})
		ip := fmt.Sprintf("10.0.1.%d", i)
		put(t, cli, orders, inst(ip, 80))
		eventually(t, "the change made after the restart", func() bool {
			got, _ := rec.last()
			return strings.Contains(got, ip+":80")
		})
	}
	rec.waitLast(t, "10.0.0.1:80,10.0.1.0:80,10.0.1.1:80,10.0.1.2:80")
	for _, l := range rec.all() {
		if len(l) == 0 {
			t.Fatalf("an empty list was delivered: %v", rec.all())
		}
	}
}

// TestAuthorizationErrorsArePermanent enables authentication on a real
// member: a user without permission on the prefix stops the subscription
// at once instead of retrying forever.
func TestAuthorizationErrorsArePermanent(t *testing.T) {
	c := newCluster(t, 1)
	admin := newClient(t, c)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "reader", "readerpw"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// A wrong password fails clientv3.New itself (it authenticates
	// first); later failures (a password changed while the client runs)
	// are mapped like permission errors (TestClassify).
	cfg := etcdreg.ClientConfig(nil, c.Endpoints()...)
	cfg.Username, cfg.Password = "reader", "wrong"
	if cli, err := clientv3.New(cfg); !errors.Is(err, rpctypes.ErrAuthFailed) {
		if cli != nil {
			_ = cli.Close()
		}
		t.Fatalf("clientv3.New with a wrong password = %v, want ErrAuthFailed", err)
	}

	cfg.Password = "readerpw"
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	m := newManager(t, newRegistry(t, cli))
	sub, err := m.Subscribe(ctx, orders, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(waitTimeout):
		t.Fatalf("subscription still retrying: %+v", sub.Status())
	}
	// The Manager stops at once (1 attempt) on a permanent error and keeps
	// it, unwrapped, as the reason.
	if !errors.Is(sub.Err(), rpctypes.ErrPermissionDenied) || sub.Status().TotalAttempts != 1 {
		t.Fatalf("stopped with %v after %d attempts, want permission denied after 1", sub.Err(), sub.Status().TotalAttempts)
	}
}
