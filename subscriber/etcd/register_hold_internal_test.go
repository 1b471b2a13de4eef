package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// newMember starts a one-member cluster and a client of it; both close
// at the test's end, after what the test closes itself.
func newMember(t *testing.T) (*etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	c, err := etcdtest.NewCluster(1, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cli, err := clientv3.New(ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return c, cli
}

// registerOrders registers three instances of the service orders,
// 10.0.<net>.1 to .3, closed at the test's end, and returns them with
// their first leases.
func registerOrders(t *testing.T, ctx context.Context, cli *clientv3.Client, net int, opts ...Option) ([]*registration, []clientv3.LeaseID) {
	t.Helper()
	var regs []*registration
	var leases []clientv3.LeaseID
	for i := range 3 {
		g, err := Register(ctx, cli, subscriber.Key{Service: "orders"},
			subscriber.Instance{IP: fmt.Sprintf("10.0.%d.%d", net, i+1), Port: 80, Weight: 1, Enabled: true, Healthy: true}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		regs = append(regs, g.(*registration))
		leases = append(leases, regs[i].currentLease())
	}
	return regs, leases
}

// waitUntil polls cond every 10 ms until it holds; it fails the test
// when ctx is done first, with detail's answer if detail is not nil.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool, detail func() any) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			if detail != nil {
				t.Fatalf("%s: not in time; %+v", what, detail())
			}
			t.Fatalf("%s: not in time", what)
		case <-tick.C:
		}
	}
}

// answeredSince reports whether g's last keep-alive answer came after
// t0 (read in a step of its loop).
func answeredSince(t *testing.T, g *registration, t0 time.Time) bool {
	t.Helper()
	last := make(chan time.Time, 1)
	if !g.loop.Do(func() bool { last <- g.h.kaLast; return true }) {
		t.Fatal("the Registration's loop ended")
	}
	return (<-last).After(t0)
}

// TestHubHoldsLeasesWhileTheStreamIsDown: with the member stopped, the
// hub's new keep-alive stream fails, and the first keep-alive falling due
// has the hub hold every lease (their keep-alives wait for a stream, not
// each for its due time). When the member is back before the TTL's end, a
// stream answers, the hold ends, and every Registration is answered again
// on its own lease: none waited for its TTL's end to probe the lease, none
// registered again.
func TestHubHoldsLeasesWhileTheStreamIsDown(t *testing.T) {
	c, cli := newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	core, logs := observer.New(zap.WarnLevel)
	regs, leases := registerOrders(t, ctx, cli, 3, WithTTL(15*time.Second), WithLogger(zap.New(core)))
	hub := regs[0].hub
	until := func(what string, cond func() bool) { t.Helper(); waitUntil(t, ctx, what, cond, nil) }
	c.Stop()
	until("the hub holds the leases", hub.holding)
	back := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	until("the hold ends", func() bool { return !hub.holding() })
	for _, g := range regs {
		until("an answer after the member is back", func() bool { return answeredSince(t, g, back) })
	}
	if n := logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end to probe the lease; want none (the hold ends with the stream's answer)", n)
	}
	for i, g := range regs {
		if st := g.Status(); g.currentLease() != leases[i] || st.Registrations != 1 {
			t.Fatalf("Registration %d: lease %x (was %x), %d registrations; want the same lease, one", i, g.currentLease(), leases[i], st.Registrations)
		}
	}
}

// TestHoldEndsWithALeaseGone: the hub holds every lease while the member
// is down; as it comes back, one lease is revoked. The stream answers for
// the others (and that lease's keep-alive answers that it is gone): the
// hold ends, the others keep their leases, and the one whose lease went
// registers again on a new one, without any waiting for a TTL's end.
func TestHoldEndsWithALeaseGone(t *testing.T) {
	c, cli := newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	core, logs := observer.New(zap.WarnLevel)
	regs, leases := registerOrders(t, ctx, cli, 5, WithTTL(15*time.Second), WithLogger(zap.New(core)))
	hub := regs[0].hub
	until := func(what string, cond func() bool) { t.Helper(); waitUntil(t, ctx, what, cond, nil) }
	c.Stop()
	until("the hub holds the leases", hub.holding)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	until("the hold ends", func() bool { return !hub.holding() })
	until("registered again on a new lease", func() bool {
		st := regs[0].Status()
		if st.State != subscriber.RegistrationRegistered || st.Registrations != 2 || regs[0].currentLease() == leases[0] {
			return false
		}
		resp, err := cli.Get(ctx, regs[0].key)
		return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == regs[0].currentLease()
	})
	for i, g := range regs[1:] {
		if st := g.Status(); g.currentLease() != leases[i+1] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i+1, g.currentLease(), leases[i+1], st)
		}
	}
	if n := logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end; want none", n)
	}
}

// TestHoldThroughAFlappingMember: the member stops (the hub holds every
// lease), starts and stops again at once, then comes back for good, all
// well within the TTL. Every Registration ends answered on its own lease,
// registered once; the hub neither stays holding nor loses a lease.
func TestHoldThroughAFlappingMember(t *testing.T) {
	c, cli := newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	regs, leases := registerOrders(t, ctx, cli, 6, WithTTL(60*time.Second))
	hub := regs[0].hub
	until := func(what string, cond func() bool) { t.Helper(); waitUntil(t, ctx, what, cond, nil) }
	c.Stop()
	until("the hub holds the leases", hub.holding)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	until("the hold ends", func() bool { return !hub.holding() })
	for _, g := range regs {
		until("an answer after the member is back", func() bool { return answeredSince(t, g, back) })
	}
	for i, g := range regs {
		st := g.Status()
		if g.currentLease() != leases[i] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i, g.currentLease(), leases[i], st)
		}
		resp, err := cli.Get(ctx, g.key)
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != leases[i] {
			t.Fatalf("Registration %d: key %v (%v); want it on lease %x", i, resp, err, leases[i])
		}
	}
}

// TestHubDownWhenTheConnectionLeavesReady: the hub learns of the outage
// from the client's connection, not only from a new keep-alive stream
// failing: a hub that runs only its connection watcher (no stream of its
// own) is down once the member stops, and a keep-alive that then parks
// has it hold every lease.
func TestHubDownWhenTheConnectionLeavesReady(t *testing.T) {
	c, cli := newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Get(ctx, "warm-up"); err != nil { // the connection is Ready
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(context.Background())
	h := &hub{client: cli, ctx: hctx, cancel: hcancel,
		leases: map[clientv3.LeaseID]*registration{}, parked: map[*registration]struct{}{},
		holdc: make(chan struct{}, 1)}
	h.up.Store(true)
	h.wg.Add(1)
	go h.watchConn()
	defer func() { hcancel(); h.wg.Wait() }()
	isDown := func() bool { h.lmu.Lock(); defer h.lmu.Unlock(); return h.down }
	if isDown() {
		t.Fatal("down before the member stopped")
	}
	c.Stop()
	waitUntil(t, ctx, "the hub is down", isDown, nil)
	if !h.park(&registration{}) {
		t.Fatal("a keep-alive did not park with no stream open")
	}
	if !h.holding() {
		t.Fatal("the hub does not hold the leases after a keep-alive parked while down")
	}
	select {
	case <-h.holdc:
	default:
		t.Fatal("the hold was not handed to the stream's goroutine")
	}
}
