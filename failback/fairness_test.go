package failback

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// firstLB picks the first invoker not excluded (deterministic).
type firstLB struct{}

func (firstLB) Select(ivs []cluster.Invoker, _ *cluster.Invocation, exclude []cluster.Invoker) (cluster.Invoker, error) {
	for _, iv := range ivs {
		skip := false
		for _, e := range exclude {
			if e.Target() == iv.Target() {
				skip = true
			}
		}
		if !skip {
			return iv, nil
		}
	}
	if len(ivs) == 0 {
		return nil, cluster.ErrNoInvokers
	}
	return ivs[0], nil
}

// concurrency tracks how many attempts run at once on a provider.
type concurrency struct {
	mu       sync.Mutex
	now, max int
}

func (c *concurrency) enter() {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
}

func (c *concurrency) leave() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

// Issue 13 item 3: one slow provider cannot occupy every worker. With the
// default bound (half the workers) the retries that the load balance
// would send to the hanging provider go to the healthy one while it is
// busy; with no bound, every worker hangs on it.
func TestSlowTargetCannotOccupyAllWorkers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []Option
		wantFastBy int // calls succeeded 3 s after they were queued
	}{
		{"default bound", nil, 8},
		{"no bound", []Option{withTargetConcurrency(4)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var slowC concurrency
				slow := newProvider("slow:1", func(ctx context.Context, c call) (any, error) {
					if c.first {
						return nil, errRefused
					}
					slowC.enter()
					defer slowC.leave()
					<-ctx.Done() // hangs until the attempt timeout
					return nil, ctx.Err()
				})
				fast := newProvider("fast:2", func(_ context.Context, c call) (any, error) {
					if c.first {
						return nil, errRefused
					}
					return "ok", nil
				})
				rec := newRecorder()
				opts := append([]Option{withObserver(rec.hooks()), WithLoadBalance(firstLB{}), WithConcurrency(4),
					WithAttemptTimeout(10 * time.Second),
					WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter})}, tc.opts...)
				// The first attempts find no provider, so no retry avoids the slow one.
				dir := &mutableDir{}
				f := mustNew(t, dir, opts...)
				defer mustClose(t, f)
				for range 10 {
					if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
						t.Fatal(err)
					}
				}
				dir.set(slow, fast)
				time.Sleep(3 * time.Second)
				synctest.Wait()
				n := rec.count("succeeded")
				slowC.mu.Lock()
				peak := slowC.max
				slowC.mu.Unlock()
				t.Logf("%s: %d of 10 succeeded after 3 s; at most %d attempts at once on the slow provider", tc.name, n, peak)
				if tc.wantFastBy > 0 && (n < tc.wantFastBy || peak > 2) {
					t.Fatalf("%d succeeded, %d at once on the slow provider; want >= %d and <= 2 (half of 4 workers)", n, peak, tc.wantFastBy)
				}
				if tc.wantFastBy == 0 && n != 0 {
					t.Fatalf("without a bound %d succeeded; the test does not discriminate", n)
				}
				checkStats(t, f.Stats())
			})
		})
	}
}

// With a single provider at its bound, due tasks wait (counted as Queued,
// no attempt counted) and run as its attempts end; Close reports them.
func TestTargetBoundParksWhenOnlyTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c concurrency
		var attempts atomic.Int32
		p := newProvider("only:1", func(ctx context.Context, cl call) (any, error) {
			if cl.first {
				return nil, errRefused
			}
			attempts.Add(1)
			c.enter()
			defer c.leave()
			time.Sleep(2 * time.Second)
			return "ok", nil
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithConcurrency(4), withTargetConcurrency(1),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}))
		for range 6 {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		s := f.Stats()
		checkStats(t, s)
		if s.InFlight != 1 || s.Queued != 5 || s.Retried != 1 {
			t.Fatalf("stats %+v; want 1 attempt running and 5 waiting for the target", s)
		}
		time.Sleep(5 * time.Second) // 1.5 + 5: three attempts done, the fourth running
		synctest.Wait()
		mustClose(t, f)
		s = f.Stats()
		checkStats(t, s)
		if c.max != 1 {
			t.Errorf("%d attempts at once on the only provider; want 1", c.max)
		}
		if s.Succeeded+uint64(rec.dropped[ErrClosed]) != 6 || int(s.Retried) != int(attempts.Load()) {
			t.Errorf("stats %+v, hooks %v, %d attempts", s, rec.dropped, attempts.Load())
		}
	})
}

// Issue 13 item 3: a call whose TTL ends before its next retry is dropped
// with ErrExpired instead of retried; a TTL shorter than the first wait
// refuses the call at Invoke; the time a due task waits for a worker counts.
func TestTTL(t *testing.T) {
	t.Run("between retries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithTTL(5*time.Second),
				WithPolicy(rebound.Policy{Initial: 2 * time.Second, Max: 2 * time.Second, Jitter: rebound.NoJitter}))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
			time.Sleep(time.Minute)
			synctest.Wait()
			// Attempts at 0, 2, 4 s; the next (6 s) would be past the TTL.
			if n := len(p.snapshot()); n != 3 || rec.dropped[ErrExpired] != 1 || rec.count("gaveup") != 0 {
				t.Fatalf("%d attempts, hooks %v; want 3 attempts then Dropped(expired)", n, rec.events)
			}
			checkStats(t, f.Stats())
		})
	})
	t.Run("shorter than the first wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithTTL(time.Second),
				WithPolicy(rebound.Policy{Initial: 2 * time.Second, Max: 2 * time.Second, Jitter: rebound.NoJitter}))
			defer mustClose(t, f)
			_, err := f.Invoke(callerCtx(), &cluster.Invocation{})
			var rej *rejectedError
			if !errors.As(err, &rej) || rej.Reason != ErrExpired || !errors.Is(err, ErrExpired) || !errors.Is(err, errRefused) {
				t.Fatalf("Invoke = %v; want a *rejectedError (expired)", err)
			}
			if rec.dropped[ErrExpired] != 1 {
				t.Fatalf("hooks %v", rec.events)
			}
			checkStats(t, f.Stats())
		})
	})
	t.Run("waiting for a worker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
				if !c.first && c.inv.Method == "slow" {
					time.Sleep(10 * time.Second)
					return "ok", nil
				}
				return nil, errRefused
			})
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithConcurrency(1), WithTTL(3*time.Second),
				WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "slow"})
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "late"})
			time.Sleep(time.Minute)
			synctest.Wait()
			d := rec.get("dropped")
			if len(d) != 1 || d[0].Invocation.Method != "late" || rec.dropped[ErrExpired] != 1 || d[0].Attempts != 1 {
				t.Fatalf("dropped %+v (%v); want the late call expired without a retry", d, rec.dropped)
			}
		})
	})
}
