package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// TestClusterLeaderLossAndQuorumLoss runs a subscription against a
// three-member cluster: it survives the loss of the leader, retries
// without spinning while the cluster has no quorum, and converges once
// the quorum is back.
func TestClusterLeaderLossAndQuorumLoss(t *testing.T) {
	var ranges atomic.Int64 // Range requests received by any member
	c := newCluster(t, 3, etcdtest.WithRequestHook(func(r etcdtest.Request) {
		if r.Name == etcdtest.RequestRange {
			ranges.Add(1)
		}
	}))
	cli := newClient(t, c)
	put(t, cli, orders, inst("10.0.0.1", 80))
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:80")

	// 1. The leader crashes: changes keep arriving through the others.
	leader := c.Leader()
	c.StopMember(leader)
	put(t, cli, orders, inst("10.0.0.2", 80))
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80")
	t.Logf("after the leader (m%d) stopped: %d attempts in all", leader, sub.Status().TotalAttempts)
	if err := c.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)

	// 2. Two members stop: no quorum. The remaining member cancels the
	// watch (no leader); the Manager retries, each attempt failing fast
	// with "no leader", with backoff.
	survivor := (c.Leader() + 1) % 3
	for i := range 3 {
		if i != survivor {
			c.StopMember(i)
		}
	}
	eventually(t, "the subscription to notice the loss of quorum", func() bool {
		st := sub.Status()
		return st.State == subscriber.StateRetrying && st.Attempts >= 2
	})
	startAttempts, startRanges, start := sub.Status().Attempts, ranges.Load(), time.Now()
	const window = 6 * time.Second
	timer := time.NewTimer(window)
	<-timer.C // the window over which attempts are counted, not a wait for something to happen
	st := sub.Status()
	attempts, reqs, elapsed := st.Attempts-startAttempts, ranges.Load()-startRanges, time.Since(start)
	t.Logf("no quorum for %v: %d attempts, %d Range requests, last error: %v", elapsed.Round(time.Millisecond), attempts, reqs, st.LastErr)
	if st.State != subscriber.StateRetrying {
		t.Fatalf("state without quorum = %v, want retrying", st.State)
	}
	// Without quorum the last attempt either reached the remaining member
	// (no leader, or its timeout: the attempt's context, or the gRPC
	// status DeadlineExceeded, which does not wrap the context's error) or
	// found the client switching members (the adapter fails fast with
	// ErrNotConnected): all transient.
	if !errors.Is(st.LastErr, rpctypes.ErrNoLeader) && !errors.Is(st.LastErr, context.DeadlineExceeded) &&
		status.Code(st.LastErr) != codes.DeadlineExceeded && !errors.Is(st.LastErr, etcdreg.ErrNotConnected) {
		t.Errorf("last error %v does not say the cluster has no leader or is unreachable", st.LastErr)
	}
	// fastPolicy waits up to 1 s (0.5 s on average once the ceiling is
	// reached) between attempts: a loop that waits stays well below this
	// bound, one that spins (even one paced by the Manager's limiter,
	// 100/s) is far above it.
	if limit := 6*int(elapsed/time.Second) + 10; attempts < 1 || attempts > limit {
		t.Errorf("%d attempts in %v, want between 1 and %d", attempts, elapsed, limit)
	}
	// The client's own retries (MaxUnaryRetries 1) do not multiply them.
	if reqs > 2*int64(attempts)+2 {
		t.Errorf("%d Range requests for %d attempts: something retries inside an attempt", reqs, attempts)
	}
	// The list is kept while the cluster is unavailable.
	if got, _ := rec.last(); got != "10.0.0.1:80,10.0.0.2:80" {
		t.Errorf("list without quorum = %q", got)
	}

	// 3. The quorum is back: the subscription converges.
	for i := range 3 {
		if i != survivor {
			if err := c.StartMember(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitReady(t, c)
	put(t, cli, orders, inst("10.0.0.3", 80))
	rec.waitLast(t, "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80")
	eventually(t, "the subscription to be confirmed", func() bool {
		return sub.Status().State == subscriber.StateSubscribed
	})
	assertRealStates(t, rec.all(), "10.0.0.1:80", "10.0.0.1:80,10.0.0.2:80", "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80")
}

func waitReady(t testing.TB, c *etcdtest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// assertRealStates checks that the delivered lists are, in order, a
// subsequence of the real states of the service (states may be coalesced,
// never invented, repeated or reordered).
func assertRealStates(t testing.TB, lists [][]subscriber.Instance, states ...string) {
	t.Helper()
	got := make([]string, len(lists))
	for i, l := range lists {
		got[i] = addrs(l)
	}
	j := 0
	for i, g := range got {
		for j < len(states) && states[j] != g {
			j++
		}
		if j == len(states) {
			t.Fatalf("list %d %q is not a later real state; delivered %q, states %q", i, g, got, states)
		}
		j++ // the same state twice in a row is a duplicate
	}
}

// TestCompactionWhileWatcherIsBehind makes a watch fall behind a
// compaction: its client talks to one member only, which is down while
// the others change the service and compact the history. When the member
// is back, the client's watch resumes from a compacted revision; the
// adapter asks for a resubscription and a fresh Get catches up, without
// losing a change.
func TestCompactionWhileWatcherIsBehind(t *testing.T) {
	c := newCluster(t, 3)
	writer := newClient(t, c)
	put(t, writer, orders, inst("10.0.0.1", 80))
	put(t, writer, orders, inst("10.0.0.2", 80))

	// The watcher's client knows only member 0, which must not be the
	// leader (stopping the leader would take an election too).
	watched := (c.Leader() + 1) % 3
	cli := newClient(t, c, c.Endpoint(watched))
	reg := newRegistry(t, cli)
	sink := newSinkRecorder()
	if err := reg.Subscribe(context.Background(), orders, sink); err != nil {
		t.Fatal(err)
	}
	if got := addrs(<-sink.updates); got != "10.0.0.1:80,10.0.0.2:80" {
		t.Fatalf("first list = %q", got)
	}

	c.StopMember(watched)
	others := []string{}
	for i := range 3 {
		if i != watched {
			others = append(others, c.Endpoint(i))
		}
	}
	w2 := newClient(t, c, others...)
	del(t, w2, orders, "10.0.0.1:80")
	put(t, w2, orders, inst("10.0.0.3", 80))
	var rev int64
	write(t, "get the revision", func(ctx context.Context) error {
		resp, err := w2.Get(ctx, "x")
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	write(t, "compact", func(ctx context.Context) error {
		_, err := w2.Compact(ctx, rev)
		return err
	})
	if err := c.StartMember(watched); err != nil {
		t.Fatal(err)
	}

	select {
	case err := <-sink.resubscribe:
		if !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("Resubscribe(%v), want ErrCompacted", err)
		}
	case l := <-sink.updates:
		t.Fatalf("the watch delivered %q instead of reporting the compaction", addrs(l))
	case <-time.After(waitTimeout):
		t.Fatal("the watch did not report the compaction")
	}
	// The Manager would now call Subscribe again: the fresh Get has
	// every change.
	eventually(t, "a resubscription to succeed", func() bool {
		return reg.Subscribe(context.Background(), orders, sink) == nil
	})
	if got := addrs(<-sink.updates); got != "10.0.0.2:80,10.0.0.3:80" {
		t.Fatalf("list after the resubscription = %q, want the state after the compaction", got)
	}
	// And the new watch delivers later changes.
	put(t, w2, orders, inst("10.0.0.4", 80))
	select {
	case l := <-sink.updates:
		if got := addrs(l); got != "10.0.0.2:80,10.0.0.3:80,10.0.0.4:80" {
			t.Fatalf("list = %q", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no update after the resubscription")
	}
}

// TestCompactionThroughManager is TestCompactionWhileWatcherIsBehind
// through a Manager: the listener ends with the right list, having seen
// only real states, each once.
func TestCompactionThroughManager(t *testing.T) {
	c := newCluster(t, 3)
	writer := newClient(t, c)
	put(t, writer, orders, inst("10.0.0.1", 80))
	watched := (c.Leader() + 1) % 3
	cli := newClient(t, c, c.Endpoint(watched))
	m := newManager(t, newRegistry(t, cli))
	var rec recorder
	sub, err := m.Subscribe(context.Background(), orders, rec.listener)
	if err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, "10.0.0.1:80")
	before := sub.Status().TotalAttempts

	c.StopMember(watched)
	var others []string
	for i := range 3 {
		if i != watched {
			others = append(others, c.Endpoint(i))
		}
	}
	w2 := newClient(t, c, others...)
	states := []string{"10.0.0.1:80"}
	for i := 2; i <= 6; i++ {
		put(t, w2, orders, inst(fmt.Sprintf("10.0.0.%d", i), 80))
		states = append(states, states[len(states)-1]+fmt.Sprintf(",10.0.0.%d:80", i))
	}
	write(t, "compact", func(ctx context.Context) error {
		resp, err := w2.Get(ctx, "x")
		if err != nil {
			return err
		}
		_, err = w2.Compact(ctx, resp.Header.Revision)
		return err
	})
	if err := c.StartMember(watched); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, states[len(states)-1])
	if st := sub.Status(); st.TotalAttempts <= before {
		t.Fatalf("status %+v: the subscription was not confirmed again", st)
	}
	assertRealStates(t, rec.all(), states...)
	eventually(t, "the subscription to settle", func() bool {
		return sub.Status().State == subscriber.StateSubscribed
	})
	put(t, w2, orders, inst("10.0.0.7", 80))
	rec.waitLast(t, states[len(states)-1]+",10.0.0.7:80")
}
