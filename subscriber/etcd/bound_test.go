package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// createStall makes the members hold every watch creation while armed,
// as a server that never answers would: the hook blocks the member's
// receiving goroutine of the Watch stream until released.
type createStall struct {
	armed   atomic.Bool
	arrived chan struct{} // one value per held creation
	release chan struct{}
	once    sync.Once
}

func newCreateStall() *createStall {
	return &createStall{arrived: make(chan struct{}, 100), release: make(chan struct{})}
}

func (s *createStall) hook(r etcdtest.Request) {
	if r.Name != etcdtest.RequestWatchCreate || !s.armed.Load() {
		return
	}
	s.arrived <- struct{}{}
	select {
	case <-s.release:
	case <-time.After(time.Minute): // never hold a member for good
	}
}

// free releases every held creation and stops holding new ones.
func (s *createStall) free() {
	s.armed.Store(false)
	s.once.Do(func() { close(s.release) })
}

func (s *createStall) waitArrived(t testing.TB) {
	t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(waitTimeout):
		t.Fatal("no watch creation reached the member")
	}
}

// stalledCluster starts a cluster whose watch creations can be held; the
// stall is freed before the cluster closes.
func stalledCluster(t testing.TB, size int) (*etcdtest.Cluster, *createStall) {
	stall := newCreateStall()
	c := newCluster(t, size, etcdtest.WithRequestHook(stall.hook))
	t.Cleanup(stall.free)
	return c, stall
}

// subscribeAsync runs one Subscribe attempt and reports its error and
// how long it took.
func subscribeAsync(r *etcdreg.Registry, ctx context.Context, sink subscriber.Sink) <-chan attemptResult {
	out := make(chan attemptResult, 1)
	go func() {
		start := time.Now()
		err := r.Subscribe(ctx, orders, sink)
		out <- attemptResult{err, time.Since(start)}
	}()
	return out
}

type attemptResult struct {
	err     error
	elapsed time.Duration
}

// awaitAttempt waits for an attempt bounded by about bound; it fails the
// test if the attempt is still running long after (a hang, as before the
// fix: the attempt then ended only when the server answered).
func awaitAttempt(t testing.TB, res <-chan attemptResult, bound time.Duration) attemptResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(bound + 5*time.Second):
		t.Fatalf("the attempt did not return within %v of its bound %v", 5*time.Second, bound)
	}
	panic("unreachable")
}

// TestSubscribeBoundedWhenCreateIsNotAnswered: the server receives the
// watch creation and does not answer it. The attempt (500 ms timeout,
// 700 ms ctx) returns with a transient deadline error at its timeout,
// not when the server answers. Before the fix it returned only once the
// creation was answered (issue 14, item 13: after 4 s, and once with nil
// after its ctx had expired).
func TestSubscribeBoundedWhenCreateIsNotAnswered(t *testing.T) {
	c, stall := stalledCluster(t, 1)
	cli := newClient(t, c)
	r := newRegistry(t, cli, etcdreg.WithAttemptTimeout(500*time.Millisecond))

	// A first subscription makes the connection ready (and leaves a
	// watch on the client's shared stream). It and the fence below go
	// through a Registry with the default attempt timeout: on a loaded
	// machine, dialling and creating the first watch can take more than
	// the 500 ms under test.
	warm := newRegistry(t, cli)
	if err := warm.Subscribe(context.Background(), orders, newSinkRecorder()); err != nil {
		t.Fatal(err)
	}
	stall.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	sink := newSinkRecorder()
	res := awaitAttempt(t, subscribeAsync(r, ctx, sink), 700*time.Millisecond)
	t.Logf("attempt with a 500 ms timeout returned after %v: %v", res.elapsed.Round(time.Millisecond), res.err)
	if !errors.Is(res.err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe = %v, want a deadline error", res.err)
	}
	if res.err == nil || !strings.HasPrefix(res.err.Error(), "etcd: watch ") {
		t.Fatalf("Subscribe = %v, want the error of the watch", res.err)
	}
	stall.free()
	// The watch of the failed attempt is gone: nothing reaches its sink.
	put(t, cli, orders, inst("10.0.0.1", 80))
	if err := warm.Subscribe(context.Background(), orders, newSinkRecorder()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-sink.updates:
		t.Fatalf("the failed attempt's sink got %v", l)
	default:
	}
}

// TestSubscribeBoundedWhenOnlyMemberDies: the only member crashes while
// the attempt waits for its watch to be created. clientv3's watch stream
// then waits for a connection; the attempt returns at its ctx's end.
func TestSubscribeBoundedWhenOnlyMemberDies(t *testing.T) {
	c, stall := stalledCluster(t, 1)
	cli := newClient(t, c)
	r := newRegistry(t, cli)
	if err := r.Subscribe(context.Background(), orders, newSinkRecorder()); err != nil {
		t.Fatal(err)
	}
	stall.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pending := subscribeAsync(r, ctx, newSinkRecorder())
	stall.waitArrived(t)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.StopMember(0)
	}()
	res := awaitAttempt(t, pending, time.Second)
	t.Logf("attempt with a 1 s ctx, member crashed during the watch creation: returned after %v: %v",
		res.elapsed.Round(time.Millisecond), res.err)
	if res.err == nil {
		t.Fatal("Subscribe succeeded with the only member down")
	}
	stall.free()
	<-stopped
}

// TestManagerCloseBoundedWithEveryMemberDown: every member of a
// three-member cluster is down, one subscription is established, one is
// retrying and one is stuck in an attempt whose watch creation the
// server never answered. Shutdown returns within its bound (the
// Manager's Close waits only for attempts, which end with their ctx, and
// Unsubscribe, which makes no request). Before the fix, Shutdown(4s)
// returned "context deadline exceeded" and Close ended only when a member
// came back.
func TestManagerCloseBoundedWithEveryMemberDown(t *testing.T) {
	c, stall := stalledCluster(t, 3)
	cli := newClient(t, c)
	r := newRegistry(t, cli)
	m, err := subscriber.New(r, subscriber.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })

	live, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	<-live.Ready()
	stall.armed.Store(true)
	stuck, err := m.Subscribe(context.Background(), subscriber.Key{Service: "stuck"}, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	stall.waitArrived(t)
	c.Stop()
	eventually(t, "the Manager to see the outage", func() bool {
		return live.Status().State == subscriber.StateRetrying
	})
	if _, err := m.Subscribe(context.Background(), subscriber.Key{Service: "down"}, func([]subscriber.Instance) {}); err != nil {
		t.Fatal(err)
	}

	const bound = 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	err = m.Shutdown(ctx)
	elapsed := time.Since(start)
	t.Logf("Shutdown with every member down (one attempt stuck in its watch creation) returned after %v: %v",
		elapsed.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("Shutdown = %v, want nil within %v", err, bound)
	}
	select {
	case <-stuck.Done():
	default:
		t.Fatal("the stuck subscription is still running after Shutdown")
	}
	start = time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Registry.Close afterwards: %v", time.Since(start).Round(time.Millisecond))
}
