package etcd_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// keyLog records, with their arrival times, the events of one key seen by
// a watch of its own (through its own client, without WithRequireLeader,
// so that it waits through a quorum loss rather than ending).
type keyLog struct {
	mu     sync.Mutex
	events []keyEvent
}

type keyEvent struct {
	at    time.Time
	typ   mvccpb.Event_EventType
	lease int64
}

func watchKey(t testing.TB, cli *clientv3.Client, key string) *keyLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	l := &keyLog{}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	wg.Go(func() {
		for wr := range wch {
			l.mu.Lock()
			for _, ev := range wr.Events {
				l.events = append(l.events, keyEvent{time.Now(), ev.Type, ev.Kv.Lease})
			}
			l.mu.Unlock()
		}
	})
	return l
}

func (l *keyLog) snapshot() []keyEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]keyEvent(nil), l.events...)
}

// missing sums the time the key was deleted (from each DELETE to the
// next PUT, or to now) and counts the deletions.
func (l *keyLog) missing() (total time.Duration, deletes int) {
	var since time.Time
	for _, ev := range l.snapshot() {
		switch {
		case ev.typ == mvccpb.DELETE && since.IsZero():
			since, deletes = ev.at, deletes+1
		case ev.typ == mvccpb.PUT && !since.IsZero():
			total += ev.at.Sub(since)
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		total += time.Since(since)
	}
	return total, deletes
}

// TestQuorumLossLongerThanTTLKeepsKey: two members of three stop for
// 2.5 TTLs. The provider's keep-alive channel closes after one TTL
// without answer; the Registration asks TimeToLive (failing while there
// is no leader, then answering that the lease lives, extended by the new
// leader) and keeps the old lease alive: the key is never deleted. Before
// (issue 14, item 14), Register took the closed channel as "lease lost",
// stopped the keep-alives, and the old lease expired about one TTL after
// the quorum returned, deleting the key until the backoff ended.
func TestQuorumLossLongerThanTTLKeepsKey(t *testing.T) {
	c := newCluster(t, 3)
	cli := newClient(t, c)
	g := register(t, func() (*etcdreg.Registration, error) {
		// A slow policy, as the default one is (up to 30 s): the
		// registration must not depend on its retries being quick.
		return etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80),
			etcdreg.WithTTL(2*time.Second), etcdreg.WithPolicy(rebound.Policy{Initial: 2 * time.Second, Max: 8 * time.Second}))
	})
	first := g.Lease()
	admin := newClient(t, c, c.Endpoint(0))
	log := watchKey(t, admin, g.InstanceKey())

	const ttl = 2 * time.Second
	c.StopMember(1)
	c.StopMember(2)
	outage := time.NewTimer(5 * ttl / 2)
	<-outage.C
	for _, i := range []int{1, 2} {
		if err := c.StartMember(i); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, c)
	back := time.Now()
	// An old lease left without keep-alives would expire about one TTL
	// after the new leader extended it; watch for three.
	eventually(t, "three TTLs after the quorum is back", func() bool { return time.Since(back) > 3*ttl })
	missing, deletes := log.missing()
	t.Logf("quorum lost for %v (TTL %v): key deleted %d times, missing %v in all; %d leases granted",
		5*ttl/2, ttl, deletes, missing.Round(time.Millisecond), g.Status().Registrations)
	if deletes != 0 {
		t.Fatalf("the key was deleted %d times (missing %v): %+v", deletes, missing, log.snapshot())
	}
	if g.Lease() != first || g.Status().Registrations != 1 {
		t.Fatalf("lease %x (%d granted), want the first one %x kept", g.Lease(), g.Status().Registrations, first)
	}
	// TimeToLive goes to the leader: it can fail while an election runs
	// (a loaded machine can miss the 1 s election timeout). Ask until the
	// leader answers; a lease gone is an answer (TTL -1), not an error.
	var resp *clientv3.LeaseTimeToLiveResponse
	eventually(t, "the leader to answer TimeToLive", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		resp, err = admin.TimeToLive(ctx, first)
		if err != nil {
			t.Logf("TimeToLive(first lease): %v", err)
		}
		return err == nil
	})
	if resp.TTL <= 0 {
		t.Fatalf("TimeToLive(first lease) = %+v; want alive", resp)
	}
}

// TestTwoRegistrationsOfOneInstance: two Registrations of the same
// instance (a reused ID, or a restarted process overlapping the old one
// on the same ip:port). The second takes the key over; the first leaves
// it (they do not fight: the key is written twice, not in a loop).
// Closing either keeps the instance registered through the other; an
// admin deleting the key, or putting it without a lease, has it put back.
func TestTwoRegistrationsOfOneInstance(t *testing.T) {
	c := newCluster(t, 1)
	admin := newClient(t, c)
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, orders, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	log := watchKey(t, admin, k)
	present := func(what string) clientv3.LeaseID {
		t.Helper()
		var lease clientv3.LeaseID
		eventually(t, what, func() bool {
			resp, err := admin.Get(context.Background(), k)
			if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
				return false
			}
			lease = clientv3.LeaseID(resp.Kvs[0].Lease)
			return true
		})
		return lease
	}
	for _, order := range []string{"older first", "newer first"} {
		t.Run(order, func(t *testing.T) {
			older := register(t, func() (*etcdreg.Registration, error) {
				return etcdreg.RegisterConcrete(context.Background(), newClient(t, c), orders, inst("10.0.0.1", 80), fastRegister...)
			})
			newer := register(t, func() (*etcdreg.Registration, error) {
				return etcdreg.RegisterConcrete(context.Background(), newClient(t, c), orders, inst("10.0.0.1", 80), fastRegister...)
			})
			if l := present("the key on the newer lease"); l != newer.Lease() {
				t.Fatalf("key on lease %x, want the newer registration's %x", l, newer.Lease())
			}
			// The watch of the log is asynchronous: wait for the newer's put.
			eventually(t, "the log to see the newer registration's put", func() bool {
				evs := log.snapshot()
				return len(evs) > 0 && evs[len(evs)-1].lease == int64(newer.Lease())
			})
			before := len(log.snapshot())
			settle := time.NewTimer(time.Second)
			<-settle.C
			if n := len(log.snapshot()) - before; n != 0 {
				t.Fatalf("%d writes of the key while both registrations run: they fight over it", n)
			}

			first, second := older, newer
			if order == "newer first" {
				first, second = newer, older
			}
			if err := first.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if l := present("the key, after one registration shut down"); l != second.Lease() {
				t.Fatalf("key on lease %x, want the remaining registration's %x", l, second.Lease())
			}

			// Deleted by someone: put back.
			repairs := second.Status().Repairs
			if _, err := admin.Delete(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the key put back after a delete", func() bool { return second.Status().Repairs > repairs })
			present("the key after a delete")
			// Put without a lease (it would outlive the instance): moved
			// back onto the lease.
			v, _ := etcdreg.EncodeInstance(subscriber.Instance{IP: "10.0.0.1", Port: 80, Ephemeral: true})
			if _, err := admin.Put(context.Background(), k, string(v)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the key back on the lease", func() bool {
				resp, err := admin.Get(context.Background(), k)
				return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == second.Lease()
			})

			if err := second.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the key gone after both shut down", func() bool {
				resp, err := admin.Get(context.Background(), k)
				return err == nil && len(resp.Kvs) == 0
			})
		})
	}
}

// TestRegistrationCloseStopsWithoutRevoking: Close stops at once and
// leaves the key to its lease; Shutdown afterwards still revokes.
func TestRegistrationCloseStopsWithoutRevoking(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	g, err := etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	resp, err := cli.Get(context.Background(), g.InstanceKey())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after Close: %+v, %v; want the key still there (on its lease)", resp, err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err = cli.Get(context.Background(), g.InstanceKey())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("after Shutdown: %+v, %v; want the key gone", resp, err)
	}
}

// TestBlackholedMemberKeepsLease: the member carrying a provider's
// lease keep-alive stream is blackholed (it runs, its peers see it, but
// no byte reaches the client and the connection stays open). The client
// notices only through gRPC keep-alive (ClientConfig: 10 s + 3 s) and
// moves to another member; with the default TTL (30 s) that is before
// the lease can expire, so the key is never deleted. With the previous
// defaults (TTL 10 s, keep-alive 10 s + 5 s), set
// REBOUND_ETCD_OLD_DEFAULTS=1: the lease expired and the key was deleted.
// Real time, about 40 s: skipped with -short.
func TestBlackholedMemberKeepsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through gRPC keep-alive detection in real time")
	}
	old, _ := strconv.ParseBool(os.Getenv("REBOUND_ETCD_OLD_DEFAULTS"))
	c := newCluster(t, 3)
	cfg := etcdreg.ClientConfig(nil, c.Endpoint(0))
	ttl := etcdreg.DefaultTTL
	var opts []etcdreg.Option
	if old {
		cfg.DialKeepAliveTimeout = 5 * time.Second
		ttl = 10 * time.Second
		opts = append(opts, etcdreg.WithTTL(ttl))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), opts...)
	})
	// Only member 0 was known when the lease stream opened; now the
	// client may fail over to the others.
	cli.SetEndpoints(c.Endpoints()...)
	admin := newClient(t, c, c.Endpoint(1), c.Endpoint(2))
	log := watchKey(t, admin, g.InstanceKey())

	c.BlackholeMember(0)
	defer c.HealMember(0)
	observe := ttl + 10*time.Second
	window := time.NewTimer(observe)
	<-window.C
	missing, deletes := log.missing()
	t.Logf("member blackholed for %v, TTL %v, keep-alive %v + %v: key deleted %d times, missing %v; %d leases granted",
		observe, ttl, cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout, deletes, missing.Round(time.Millisecond), g.Status().Registrations)
	if old {
		return // a measurement of the old defaults, not a test
	}
	if deletes != 0 {
		t.Fatalf("the key was deleted %d times (missing %v)", deletes, missing)
	}
}

// TestRegistrationRetriesAtOnceWhenConnectionIsBack: a repair (the key
// was deleted) fails because the server does not answer it within the
// attempt timeout, and the policy then waits 30 s. The member restarts:
// when the client's connection is ready again, the wait is cut short and
// the key is back within seconds, not after the 30 s.
func TestRegistrationRetriesAtOnceWhenConnectionIsBack(t *testing.T) {
	var armed atomic.Bool
	arrived := make(chan struct{}, 100)
	release := make(chan struct{})
	var once sync.Once
	free := func() { armed.Store(false); once.Do(func() { close(release) }) }
	c := newCluster(t, 1, etcdtest.WithRequestHook(func(r etcdtest.Request) {
		if r.Name != etcdtest.RequestTxn || !armed.Load() {
			return
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(free)
	cli := newClient(t, c)
	admin := newClient(t, c)
	core, logs := observer.New(zap.DebugLevel)
	// The attempt timeout only has to end the held repair; it also bounds
	// the first Register (a lease grant and a put), which took up to
	// 200 ms under -race on a loaded 2-core machine: 2 s leaves room.
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80),
			etcdreg.WithLogger(zap.New(core)),
			etcdreg.WithAttemptTimeout(2*time.Second),
			etcdreg.WithPolicy(rebound.Policy{Initial: 30 * time.Second, Max: 30 * time.Second, Jitter: rebound.NoJitter}))
	})
	armed.Store(true)
	if _, err := admin.Delete(context.Background(), g.InstanceKey()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("the registration did not try to put its key back")
	}
	eventually(t, "the repair to fail and wait", func() bool {
		return logs.FilterMessage("registration repair failed").Len() > 0
	})
	// Stop the member before the held Txn goes on, so that it cannot
	// put the key back late.
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.StopMember(0) }()
	eventually(t, "the member to stop", func() bool { return !c.Running(0) })
	free()
	<-stopped
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitReady(t, c)
	eventually(t, "the key back (well before the 30 s wait)", func() bool {
		resp, err := admin.Get(context.Background(), g.InstanceKey())
		return err == nil && len(resp.Kvs) == 1
	})
	t.Logf("key back %v after the member restarted (policy wait: 30 s)", time.Since(start).Round(time.Millisecond))
}

// TestRegistrationWithClosedClient: the client closes under a running
// Registration: its loop stops for good (goleak in TestMain), and
// Shutdown reports the closed client.
func TestRegistrationWithClosedClient(t *testing.T) {
	c := newCluster(t, 1)
	cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	g, err := etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	err = g.Shutdown(context.Background())
	if !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("Shutdown with a closed client = %v, want rebound.ErrClosed", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
