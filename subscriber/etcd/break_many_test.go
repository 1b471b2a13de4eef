package etcd_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakManyRegistrationsThroughWipe keeps 1,000 Registrations of one
// client, one of them with an observer that blocks and one with an
// observer that panics, through a cluster that goes down and comes back
// empty (every lease and key gone). Correct behaviour: every key comes
// back on a new lease while the blocked observer still holds its own
// Registration (a slow observer holds up no other Registration, nor the
// shared keep-alive stream, watch or connection watcher); the blocked one
// comes back once released; Shutdown of all leaves no key and no goroutine.
func TestBreakManyRegistrationsThroughWipe(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*waitTimeout)
	defer cancel()
	for _, x := range []*clientv3.Client{cli, admin} {
		if _, err := x.Get(ctx, "warm-up"); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()

	var armed atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	var blockedIn atomic.Bool
	slow := rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {
		if armed.Load() {
			blockedIn.Store(true)
			<-release
		}
	}))
	var panics atomic.Int64
	panicky := rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {
		if armed.Load() {
			panics.Add(1)
			panic("observer")
		}
	}))

	const n = 1000
	regs := make([]*etcdreg.Registration, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	// Eight Registers at a time: with 1,000 at once under -race, a
	// 2 s lease can expire between its grant and its put (the first
	// registration is one attempt, its error Register's).
	sem := make(chan struct{}, 8)
	for i := range regs {
		opts := fastRegister
		switch i {
		case 0:
			opts = fastRegisterWith(slow)
		case 1:
			opts = fastRegisterWith(panicky)
		}
		// A 10 s lease, not fastRegister's 2 s: 1,000 keep-alives every
		// 0.7 s under -race on a busy 2-core machine come late, and leases
		// expiring on their own would hide what the wipe tests.
		opts = append(opts[:len(opts):len(opts)], etcdreg.WithTTL(10*time.Second))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst(fmt.Sprintf("10.1.%d.%d", i/200, i%200+1), 80), opts...)
			if err != nil {
				errs <- err
				return
			}
			regs[i] = g
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	defer func() {
		// Released first: deferred before this, unblock would run after
		// the Close of the blocked Registration, which waits for it.
		unblock()
		for _, g := range regs {
			_ = g.Close()
		}
	}()
	count := func() int64 {
		resp, err := admin.Get(ctx, etcdreg.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return -1
		}
		return resp.Count
	}
	// The wipe's recovery re-grants 1,000 leases on one member: under
	// -race on a busy 2-core machine that can take longer than
	// waitTimeout, so its waits are longer.
	long := func(what string, cond func() bool) {
		t.Helper()
		subscribertest.Eventually(t, 3*waitTimeout, what, cond)
	}
	eventually(t, "all keys registered", func() bool { return count() == n })

	armed.Store(true)
	if err := c.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	eventually(t, "the slow observer called", blockedIn.Load)
	long("every other key back while one observer blocks", func() bool { return count() >= n-1 })
	if panics.Load() == 0 {
		t.Error("the panicking observer was never called")
	}
	unblock()
	long("every key back", func() bool { return count() == n })
	// A key is listed once its put is done; its Registration counts the
	// new lease when the put returns to it, a moment later.
	for _, g := range regs {
		if g.Status().Registrations < 2 {
			eventually(t, g.InstanceKey()+": more than 1 registration, a new lease after the wipe", func() bool {
				return g.Status().Registrations >= 2
			})
		}
	}

	armed.Store(false)
	for _, g := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown %s: %v", g.InstanceKey(), err)
			}
		}()
	}
	wg.Wait()
	if k := count(); k != 0 {
		t.Errorf("%d keys left after every Shutdown returned", k)
	}
	var now int
	eventually(t, "the shared goroutines gone with the last Registration", func() bool {
		now = runtime.NumGoroutine()
		return now <= before
	})
}
