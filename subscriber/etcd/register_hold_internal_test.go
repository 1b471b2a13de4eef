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

// holdScene is what the hold tests start from: a member and its client,
// Registrations of orders (10.0.<net>.x) with ttl, their first leases,
// their hub, and the warnings they log; ctx ends at the test's end or
// after timeout.
type holdScene struct {
	t      *testing.T
	c      *etcdtest.Cluster
	cli    *clientv3.Client
	ctx    context.Context
	regs   []*registration
	leases []clientv3.LeaseID
	hub    *hub
	logs   *observer.ObservedLogs
}

func newHoldScene(t *testing.T, timeout time.Duration, net int, ttl time.Duration) *holdScene {
	t.Helper()
	s := &holdScene{t: t}
	s.c, s.cli = newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	s.ctx = ctx
	core, logs := observer.New(zap.WarnLevel)
	s.logs = logs
	s.regs, s.leases = registerOrders(t, ctx, s.cli, net, WithTTL(ttl), WithLogger(zap.New(core)))
	s.hub = s.regs[0].hub
	return s
}

// until waits for cond (what: for the failure's message).
func (s *holdScene) until(what string, cond func() bool) {
	s.t.Helper()
	waitUntil(s.t, s.ctx, what, cond, nil)
}

// TestHubHoldsLeasesWhileTheStreamIsDown: with the member stopped, the
// hub's new keep-alive stream fails, and the first keep-alive falling due
// has the hub hold every lease (their keep-alives wait for a stream, not
// each for its due time). When the member is back before the TTL's end, a
// stream answers, the hold ends, and every Registration is answered again
// on its own lease: none waited for its TTL's end to probe the lease, none
// registered again.
func TestHubHoldsLeasesWhileTheStreamIsDown(t *testing.T) {
	s := newHoldScene(t, time.Minute, 3, 15*time.Second)
	s.c.Stop()
	s.until("the hub holds the leases", s.hub.holding)
	back := time.Now()
	if err := s.c.Start(); err != nil {
		t.Fatal(err)
	}
	s.until("the hold ends", func() bool { return !s.hub.holding() })
	for _, g := range s.regs {
		s.until("an answer after the member is back", func() bool { return answeredSince(t, g, back) })
	}
	if n := s.logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end to probe the lease; want none (the hold ends with the stream's answer)", n)
	}
	for i, g := range s.regs {
		if st := g.Status(); g.currentLease() != s.leases[i] || st.Registrations != 1 {
			t.Fatalf("Registration %d: lease %x (was %x), %d registrations; want the same lease, one", i, g.currentLease(), s.leases[i], st.Registrations)
		}
	}
}

// TestHoldEndsWithALeaseGone: the hub holds every lease while the member
// is down; as it comes back, one lease is revoked. The stream answers for
// the others (and that lease's keep-alive answers that it is gone): the
// hold ends, the others keep their leases, and the one whose lease went
// registers again on a new one, without any waiting for a TTL's end.
func TestHoldEndsWithALeaseGone(t *testing.T) {
	s := newHoldScene(t, time.Minute, 5, 15*time.Second)
	s.c.Stop()
	s.until("the hub holds the leases", s.hub.holding)
	if err := s.c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Revoke(s.ctx, s.leases[0]); err != nil {
		t.Fatal(err)
	}
	s.until("the hold ends", func() bool { return !s.hub.holding() })
	s.until("registered again on a new lease", func() bool {
		st := s.regs[0].Status()
		if st.State != subscriber.RegistrationRegistered || st.Registrations != 2 || s.regs[0].currentLease() == s.leases[0] {
			return false
		}
		resp, err := s.cli.Get(s.ctx, s.regs[0].key)
		return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == s.regs[0].currentLease()
	})
	for i, g := range s.regs[1:] {
		if st := g.Status(); g.currentLease() != s.leases[i+1] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i+1, g.currentLease(), s.leases[i+1], st)
		}
	}
	if n := s.logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end; want none", n)
	}
}

// TestHoldThroughAFlappingMember: the member stops (the hub holds every
// lease), starts and stops again at once, then comes back for good, all
// well within the TTL. Every Registration ends answered on its own lease,
// registered once; the hub neither stays holding nor loses a lease.
func TestHoldThroughAFlappingMember(t *testing.T) {
	s := newHoldScene(t, 2*time.Minute, 6, 60*time.Second)
	s.c.Stop()
	s.until("the hub holds the leases", s.hub.holding)
	if err := s.c.Start(); err != nil {
		t.Fatal(err)
	}
	s.c.Stop()
	if err := s.c.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	s.until("the hold ends", func() bool { return !s.hub.holding() })
	for _, g := range s.regs {
		s.until("an answer after the member is back", func() bool { return answeredSince(t, g, back) })
	}
	for i, g := range s.regs {
		st := g.Status()
		if g.currentLease() != s.leases[i] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i, g.currentLease(), s.leases[i], st)
		}
		resp, err := s.cli.Get(s.ctx, g.key)
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.leases[i] {
			t.Fatalf("Registration %d: key %v (%v); want it on lease %x", i, resp, err, s.leases[i])
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
