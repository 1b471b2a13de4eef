package failback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
)

func TestNewValidation(t *testing.T) {
	dir := cluster.NewStaticDirectory(newProvider("a:1", nil))
	for _, tc := range []struct {
		name string
		dir  cluster.Directory
		opts []Option
		want []string
	}{
		{"nil dir", nil, nil, []string{"failback.New: dir must not be nil"}},
		{"zero tasks", dir, []Option{WithMaxTasks(0)}, []string{"failback.WithMaxTasks: n must be >= 1"}},
		{"zero workers", dir, []Option{WithConcurrency(0)}, []string{"failback.WithConcurrency: n must be >= 1"}},
		{"negative timeout", dir, []Option{WithAttemptTimeout(-time.Second)}, []string{"failback.WithAttemptTimeout: d must be >= 0"}},
		{"negative TTL", dir, []Option{WithTTL(-time.Second)}, []string{"failback.WithTTL: d must be >= 0"}},
		{"bad policy", dir, []Option{WithPolicy(rebound.Policy{Multiplier: 0.5})}, []string{"failback.WithPolicy", "Multiplier = 0.5"}},
		{"all named", dir, []Option{WithConcurrency(-2), WithMaxTasks(-3)}, []string{"WithConcurrency", "WithMaxTasks"}},
	} {
		f, err := New(tc.dir, tc.opts...)
		var ae *rebound.ArgumentError
		if f != nil || !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("%s: New = %v, %v; want a *rebound.ArgumentError", tc.name, f, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
	}
	_, err := New(dir, WithPolicy(rebound.Policy{Initial: -1}))
	if !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("bad policy error %v does not match rebound.ErrInvalidArgument", err)
	}
	// A nil option is ignored.
	f, err := New(dir, nil, WithMaxTasks(2), nil)
	if err != nil {
		t.Fatalf("New with nil options = %v; want them ignored", err)
	}
	mustClose(t, f)
}

func TestInvokeArguments(t *testing.T) {
	f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", nil)))
	defer mustClose(t, f)
	//lint:ignore SA1012 testing the nil check
	if _, err := f.Invoke(nil, &cluster.Invocation{}); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "ctx") { //nolint:staticcheck
		t.Errorf("Invoke(nil ctx) = %v", err)
	}
	if _, err := f.Invoke(context.Background(), nil); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "inv") {
		t.Errorf("Invoke(nil inv) = %v", err)
	}
	//lint:ignore SA1012 testing the nil-context error on purpose
	if err := f.Shutdown(nil); !errors.Is(err, rebound.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Shutdown(nil) = %v", err)
	}
}

func TestInvokeSuccessAndNonRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		business := errors.New("insufficient balance")
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.inv.Method == "fail" {
				return nil, business
			}
			return "result", nil
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()))
		defer mustClose(t, f)

		res, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "ok"})
		if res != "result" || err != nil {
			t.Fatalf("Invoke = %v, %v; want the result", res, err)
		}
		res, err = f.Invoke(callerCtx(), &cluster.Invocation{Method: "fail"})
		if res != nil || !errors.Is(err, business) || !errors.Is(err, errNotRetryable) {
			t.Fatalf("Invoke = %v, %v; want the business error, not retried", res, err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(p.snapshot()); n != 2 {
			t.Errorf("provider called %d times, want 2 (a business error is not retried)", n)
		}
		s := f.Stats()
		checkStats(t, s)
		if s.Offered != 0 || len(rec.events) != 0 {
			t.Errorf("stats %+v, hooks %v; want nothing handed to the background", s, rec.events)
		}
	})
}

func TestPermanentWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perm := rebound.Permanent(rebound.Transient(errRefused))
		p := newProvider("a:1", alwaysFail(perm))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithRetryable(func(error) bool { return true }))
		defer mustClose(t, f)
		_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
		if !errors.Is(err, syscall.ECONNREFUSED) || !rebound.IsPermanent(err) {
			t.Fatalf("Invoke = %v; want the permanent error", err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(p.snapshot()); n != 1 || f.Stats().Offered != 0 {
			t.Errorf("provider called %d times, stats %+v; a permanent error must not be queued", n, f.Stats())
		}
	})
}

// TestExactRetryCounts: MaxAttempts n+1 means exactly n retries, n+1
// attempts (dubbo-go made 4 retries of retries=3).
func TestExactRetryCounts(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("retries=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newProvider("a:1", alwaysFail(errRefused))
				rec := newRecorder()
				f := mustNew(t, cluster.NewStaticDirectory(p), retries(n), withObserver(rec.hooks()))
				defer mustClose(t, f)

				_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
				if n == 0 {
					// No retry: the caller gets the original error, unwrapped.
					if err != errRefused {
						t.Fatalf("Invoke = %v; want the original error", err)
					}
				} else if err != nil {
					t.Fatalf("Invoke = %v; want (nil, nil) for a queued call", err)
				}
				time.Sleep(time.Hour)
				synctest.Wait()

				if got := len(p.snapshot()); got != n+1 {
					t.Fatalf("%d attempts, want %d (1 + %d retries)", got, n+1, n)
				}
				s := f.Stats()
				checkStats(t, s)
				if s.Retried != uint64(n) {
					t.Errorf("Stats.Retried = %d, want %d", s.Retried, n)
				}
				if n == 0 {
					if s.Offered != 0 || len(rec.events) != 0 {
						t.Errorf("retries=0: stats %+v, hooks %v; want nothing queued", s, rec.events)
					}
					return
				}
				if s.GaveUp != 1 || rec.count("gaveup") != 1 || rec.count("retried") != n-1 {
					t.Fatalf("stats %+v, hooks %v", s, rec.events)
				}
				g := rec.get("gaveup")[0]
				var gerr *rebound.RetryError
				if !errors.As(g.Err, &gerr) || gerr.Attempts != n+1 || g.Attempts != n+1 ||
					!errors.Is(g.Err, rebound.ErrExhausted) || !errors.Is(g.Err, syscall.ECONNREFUSED) {
					t.Errorf("GaveUp task %+v; want a *rebound.RetryError after %d attempts, retries exhausted, wrapping the last error", g, n+1)
				}
			})
		})
	}
}

// TestRetryDelaysFollowPolicy checks the virtual time of every attempt.
func TestRetryDelaysFollowPolicy(t *testing.T) {
	t.Run("no jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			pol := rebound.Policy{Initial: time.Second, Multiplier: 2, Max: 4 * time.Second, Jitter: rebound.NoJitter}
			f := mustNew(t, cluster.NewStaticDirectory(p), WithPolicy(pol, rebound.WithMaxAttempts(6)))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
			time.Sleep(time.Hour)
			synctest.Wait()
			var got []string
			for _, c := range p.snapshot() {
				got = append(got, c.at.String())
			}
			// Waits 1s, 2s, 4s, 4s, 4s (capped).
			if want := "[0s 1s 3s 7s 11s 15s]"; fmt.Sprint(got) != want {
				t.Errorf("attempts at %v, want %s", got, want)
			}
		})
	})
	t.Run("default decorrelated jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			const nRetries = 8
			f := mustNew(t, cluster.NewStaticDirectory(p), retries(nRetries))
			defer mustClose(t, f)
			for range 50 {
				if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Hour)
			synctest.Wait()
			byTask := map[*cluster.Invocation][]time.Duration{}
			for _, c := range p.snapshot() {
				byTask[c.inv] = append(byTask[c.inv], c.at)
			}
			pol := DefaultPolicy()
			distinct, below := map[time.Duration]bool{}, 0
			for _, at := range byTask {
				if len(at) != nRetries+1 {
					t.Fatalf("%d attempts, want %d", len(at), nRetries+1)
				}
				prev := pol.Initial // decorrelated: uniform [Initial, 3*previous], capped at Max
				for n := 1; n < len(at); n++ {
					gap := at[n] - at[n-1]
					if hi := min(pol.Max, 3*prev); gap < pol.Initial || gap > hi {
						t.Errorf("wait before retry %d = %v, outside [%v, %v]", n, gap, pol.Initial, hi)
					}
					prev = gap
					if gap < pol.Max { // draws above Max are capped: equal by design
						below++
						distinct[gap] = true
					}
				}
			}
			if below < 100 || len(distinct) < below*9/10 {
				t.Errorf("only %d distinct waits among %d below Max (of 400): not jittered", len(distinct), below)
			}
		})
	})
	t.Run("retry-after", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
				if c.at == 0 {
					return nil, rebound.RetryAfter(10*time.Second, rebound.Transient(errors.New("throttled")))
				}
				return nil, errRefused
			})
			pol := rebound.Policy{Initial: time.Second, Max: time.Second, Multiplier: 1, Jitter: rebound.NoJitter}
			f := mustNew(t, cluster.NewStaticDirectory(p), WithPolicy(pol, rebound.WithMaxAttempts(3)))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
			time.Sleep(time.Hour)
			synctest.Wait()
			var got []string
			for _, c := range p.snapshot() {
				got = append(got, c.at.String())
			}
			// Retry-After 10s beats the policy's 1s; the next wait is the policy's.
			if want := "[0s 10s 11s]"; fmt.Sprint(got) != want {
				t.Errorf("attempts at %v, want %s", got, want)
			}
		})
	})
	t.Run("policy MaxAttempts ends the task", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p),
				WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(3)), withObserver(rec.hooks()))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
			time.Sleep(time.Hour)
			synctest.Wait()
			if n := len(p.snapshot()); n != 3 {
				t.Errorf("%d attempts, want 3 (policy MaxAttempts)", n)
			}
			if g := rec.get("gaveup"); len(g) != 1 || !errors.Is(g[0].Err, rebound.ErrExhausted) {
				t.Errorf("gave up %+v; want one, for rebound.ErrExhausted", g)
			}
			// A policy that allows no retry at all returns the error.
			f2 := mustNew(t, cluster.NewStaticDirectory(p), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(1)))
			defer mustClose(t, f2)
			if _, err := f2.Invoke(callerCtx(), &cluster.Invocation{}); err != errRefused {
				t.Errorf("Invoke with MaxAttempts 1 = %v; want the original error", err)
			}
		})
	})
}

// TestTaskLimitUnderConcurrency: 1,000 calls fail at once with a limit of
// 100: exactly 100 are queued, 900 are refused with ErrQueueFull, and the
// counters add up. Run it with -race.
func TestTaskLimitUnderConcurrency(t *testing.T) {
	for _, withHooks := range []bool{false, true} {
		t.Run(fmt.Sprintf("hooks=%v", withHooks), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Every first attempt fails; every retry succeeds.
				p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
					if c.first {
						return nil, errRefused
					}
					return "ok", nil
				})
				rec := newRecorder()
				opts := []Option{WithMaxTasks(100)}
				if withHooks {
					opts = append(opts, withObserver(rec.hooks()))
				}
				f := mustNew(t, cluster.NewStaticDirectory(p), opts...)
				defer mustClose(t, f)

				const calls = 1000
				errs := make([]error, calls)
				var wg sync.WaitGroup
				for i := range calls {
					wg.Go(func() {
						_, errs[i] = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
					})
				}
				wg.Wait()
				var queued, full int
				for _, err := range errs {
					var rej *rejectedError
					switch {
					case err == nil:
						queued++
					case errors.Is(err, ErrQueueFull) && errors.Is(err, syscall.ECONNREFUSED) &&
						errors.As(err, &rej) && rej.Reason == ErrQueueFull:
						full++
					default:
						t.Fatalf("unexpected error %v", err)
					}
				}
				if queued != 100 || full != 900 {
					t.Fatalf("queued %d, refused %d; want 100 and 900", queued, full)
				}
				s := f.Stats()
				checkStats(t, s)
				if s.Queued != 100 || s.Offered != calls || s.Dropped[ErrQueueFull] != 900 {
					t.Fatalf("stats %+v", s)
				}

				time.Sleep(time.Hour)
				synctest.Wait()
				s = f.Stats()
				checkStats(t, s)
				if s.Succeeded != 100 || s.Queued != 0 || s.InFlight != 0 {
					t.Fatalf("after recovery: stats %+v; want 100 succeeded", s)
				}
				if withHooks {
					if rec.count("queued") != 100 || rec.count("succeeded") != 100 || rec.dropped[ErrQueueFull] != 900 {
						t.Fatalf("hooks: queued %d, succeeded %d, dropped %v", rec.count("queued"), rec.count("succeeded"), rec.dropped)
					}
				}
			})
		})
	}
}

// TestCloseReportsEveryTask: queued tasks and tasks running when Close
// cancels them are each reported once as dropped with ErrClosed.
func TestCloseReportsEveryTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		running := make(chan struct{}, 10)
		p := newProvider("a:1", func(ctx context.Context, c call) (any, error) {
			if c.first {
				return nil, errRefused
			}
			running <- struct{}{}
			<-ctx.Done() // hangs until cancelled
			return nil, ctx.Err()
		})
		rec := newRecorder()
		var fref *Invoker
		var (
			mu          sync.Mutex
			statsInHook []Stats
		)
		hooks := rec.hooks()
		dropped := hooks.Dropped
		hooks.Dropped = func(tk Task) {
			s := fref.Stats() // hooks run with no lock held: this must not deadlock
			mu.Lock()
			statsInHook = append(statsInHook, s)
			mu.Unlock()
			dropped(tk)
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(hooks), WithConcurrency(2), withTargetConcurrency(2), WithAttemptTimeout(0),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}))
		fref = f
		for i := range 2 {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: fmt.Sprint("run", i)})
		}
		time.Sleep(1500 * time.Millisecond) // the two tasks are running now
		<-running
		<-running
		for i := range 50 {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: fmt.Sprint("wait", i)})
		}
		s := f.Stats()
		checkStats(t, s)
		if s.InFlight != 2 || s.Queued != 50 {
			t.Fatalf("before Close: stats %+v; want 2 in flight, 50 queued", s)
		}

		if err := f.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if rec.count("dropped") != 52 || rec.dropped[ErrClosed] != 52 {
			t.Fatalf("dropped %d (%v); want 52, all closed", rec.count("dropped"), rec.dropped)
		}
		seen := map[string]int{}
		for _, tk := range rec.get("dropped") {
			seen[tk.Invocation.Method]++
		}
		for m, n := range seen {
			if n != 1 {
				t.Errorf("%s dropped %d times", m, n)
			}
		}
		if len(seen) != 52 {
			t.Errorf("%d distinct tasks dropped, want 52", len(seen))
		}
		s = f.Stats()
		checkStats(t, s)
		if s.Dropped[ErrClosed] != 52 || s.Queued != 0 || s.InFlight != 0 {
			t.Errorf("after Close: stats %+v", s)
		}
		for _, c := range p.retries() {
			if !errors.Is(c.ctx.Err(), context.Canceled) {
				t.Errorf("running attempt's context not cancelled: %v", c.ctx.Err())
			}
		}
		if len(statsInHook) != 52 {
			t.Errorf("stats read in %d hooks", len(statsInHook))
		}

		// Idempotent; Invoke after Close is refused without an attempt.
		if err := f.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		before := len(p.snapshot())
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != ErrClosed {
			t.Errorf("Invoke after Close = %v; want ErrClosed", err)
		}
		if len(p.snapshot()) != before {
			t.Error("Invoke after Close called the provider")
		}
	})
}

// TestShutdownBoundedByContext: an attempt that ignores its context keeps a
// worker busy; Shutdown's ctx ends the drain, and Shutdown returns (with
// ctx.Err()) once that attempt has returned and been reported.
func TestShutdownBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.first {
				return nil, errRefused
			}
			time.Sleep(time.Minute) // ignores ctx
			return nil, errRefused
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()))
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "stuck"})
		time.Sleep(20 * time.Second) // the first retry starts within 15 s
		synctest.Wait()
		if f.Stats().InFlight != 1 {
			t.Fatalf("stats %+v; want the retry in flight", f.Stats())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != context.DeadlineExceeded {
			t.Fatalf("Shutdown = %v; want context.DeadlineExceeded", err)
		}
		if rec.dropped[ErrClosed] != 1 || rec.count("gaveup") != 0 {
			t.Errorf("hooks %v; want the stuck task dropped (closed) before Shutdown returned", rec.events)
		}
		checkStats(t, f.Stats())
		if err := f.Close(); err != nil {
			t.Fatalf("Close after Shutdown: %v", err)
		}
	})
}

// TestRetryAvoidsFailedInvoker: retries go to another provider while one
// exists, and pick up directory changes.
func TestRetryAvoidsFailedInvoker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := newProvider("10.0.0.1:1", alwaysFail(errRefused))
		good := newProvider("10.0.0.2:1", nil)
		dir := &mutableDir{}
		dir.set(bad)
		f := mustNew(t, dir, WithLoadBalance(cluster.RoundRobin()))
		defer mustClose(t, f)

		// Only the bad provider: its calls are queued.
		for range 20 {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
				t.Fatal(err)
			}
		}
		// The directory changes before the first retry.
		dir.set(bad, good)
		time.Sleep(time.Hour)
		synctest.Wait()
		if r := bad.retries(); len(r) != 0 {
			t.Errorf("%d retries went to the provider that had just failed", len(r))
		}
		if n := len(good.retries()); n != 20 || f.Stats().Succeeded != 20 {
			t.Errorf("good provider got %d retries, stats %+v; want 20 successes", n, f.Stats())
		}

		// When the failed provider is the only one, retries still go to it.
		dir.set(bad)
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "only"})
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(bad.retries()); n != 3 {
			t.Errorf("lone failed provider got %d retries, want 3", n)
		}
		checkStats(t, f.Stats())
	})
}

// TestEmptyDirectoryIsQueued: an empty directory on the first attempt is
// retryable: the call waits for a provider.
func TestEmptyDirectoryIsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := &mutableDir{}
		rec := newRecorder()
		f := mustNew(t, dir, withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}))
		defer mustClose(t, f)
		if res, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); res != nil || err != nil {
			t.Fatalf("Invoke on empty directory = %v, %v; want (nil, nil): queued", res, err)
		}
		if q := rec.get("queued"); len(q) != 1 || !errors.Is(q[0].Err, cluster.ErrNoInvokers) || q[0].Target != "" {
			t.Fatalf("queued %+v", q)
		}
		time.Sleep(1500 * time.Millisecond) // first retry: still empty
		p := newProvider("a:1", nil)
		dir.set(p)
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := rec.get("succeeded"); len(s) != 1 || s[0].Attempts != 3 || s[0].Target != "a:1" {
			t.Fatalf("succeeded %+v; want one after 3 attempts on a:1", s)
		}
		// A closed registry directory is not retryable.
		rd, _ := cluster.NewRegistryDirectory(func(subscriber.Instance) (cluster.Invoker, error) { return p, nil })
		_ = rd.Close()
		f2 := mustNew(t, rd)
		defer mustClose(t, f2)
		if _, err := f2.Invoke(callerCtx(), &cluster.Invocation{}); !errors.Is(err, rebound.ErrClosed) {
			t.Errorf("Invoke on closed directory = %v; want rebound.ErrClosed at once", err)
		}
	})
}

// TestDeadlines: the caller's deadline is not retried, the attempt's own is.
func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", func(ctx context.Context, c call) (any, error) {
			if c.inv.Method == "own-timeout" && c.first {
				return nil, fmt.Errorf("read: %w", context.DeadlineExceeded) // caller's ctx still live
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		f := mustNew(t, cluster.NewStaticDirectory(p), WithAttemptTimeout(2*time.Second),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(3)))
		defer mustClose(t, f)

		ctx, cancel := context.WithTimeout(callerCtx(), 500*time.Millisecond)
		defer cancel()
		_, err := f.Invoke(ctx, &cluster.Invocation{Method: "caller-deadline"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Invoke with expiring caller ctx = %v; want DeadlineExceeded returned", err)
		}
		if f.Stats().Offered != 0 {
			t.Fatal("call whose caller's deadline expired was queued")
		}

		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "own-timeout"}); err != nil {
			t.Fatalf("Invoke with the invoker's own timeout = %v; want queued", err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		// Queued at 0.5s: retries at 1.5s (times out at 3.5s) and 4.5s.
		var got []string
		for _, c := range p.retries() {
			got = append(got, c.at.String())
		}
		if want := "[1.5s 4.5s]"; fmt.Sprint(got) != want {
			t.Errorf("retries at %v, want %s (each retry bounded by the 2s attempt timeout)", got, want)
		}
		if s := f.Stats(); s.GaveUp != 1 || s.Retried != 2 {
			t.Errorf("stats %+v", s)
		}
	})
}

type valueKey struct{}

func TestContextValues(t *testing.T) {
	for _, inherit := range []bool{false, true} {
		t.Run(fmt.Sprintf("inherit=%v", inherit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
					if c.at == 0 { // the first attempt, at the start of the bubble
						return nil, errRefused
					}
					return "ok", nil
				})
				opts := []Option{}
				if inherit {
					opts = append(opts, WithContextValues())
				}
				f := mustNew(t, cluster.NewStaticDirectory(p), opts...)
				defer mustClose(t, f)
				ctx, cancel := context.WithCancel(context.WithValue(callerCtx(), valueKey{}, "trace-1"))
				_, _ = f.Invoke(ctx, &cluster.Invocation{})
				cancel() // the caller's cancellation never reaches the retry
				time.Sleep(time.Hour)
				synctest.Wait()
				all := p.snapshot()
				if len(all) != 2 || f.Stats().Succeeded != 1 {
					t.Fatalf("calls %d, stats %+v", len(all), f.Stats())
				}
				got := all[1].ctx.Value(valueKey{})
				if inherit && got != "trace-1" {
					t.Errorf("WithContextValues: retry saw value %v, want trace-1", got)
				}
				if !inherit && got != nil {
					t.Errorf("default: retry saw the caller's value %v", got)
				}
			})
		})
	}
}

// TestHooksOrder: Queued comes first and each task ends exactly once.
func TestHooksOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			switch {
			case c.inv.Method == "recovers" && c.at >= 2*time.Second:
				return "ok", nil
			case c.inv.Method == "business" && !c.first:
				return nil, errors.New("rejected")
			}
			return nil, errRefused
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(4)))
		defer mustClose(t, f)
		for _, m := range []string{"recovers", "exhausts", "business"} {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: m})
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		byMethod := map[string][]string{}
		for _, e := range rec.events {
			kind, m, _ := strings.Cut(e, " ")
			byMethod[m] = append(byMethod[m], kind)
		}
		want := map[string]string{
			"recovers": "[queued retried succeeded]",
			"exhausts": "[queued retried retried gaveup]",
			"business": "[queued gaveup]",
		}
		for m, w := range want {
			if got := fmt.Sprint(byMethod[m]); got != w {
				t.Errorf("%s: hooks %s, want %s", m, got, w)
			}
		}
		for _, g := range rec.get("gaveup") {
			if g.Invocation.Method == "business" && !errors.Is(g.Err, errNotRetryable) {
				t.Errorf("business give-up reason: %v", g.Err)
			}
		}
		for _, r := range rec.get("retried") {
			if r.Delay != time.Second || r.Target != "a:1" || !errors.Is(r.Err, syscall.ECONNREFUSED) {
				t.Errorf("retried %+v", r)
			}
		}
	})
}

// TestWithRegistryDirectory: a subscription-fed directory changes between
// attempts; the retry goes to the provider that appeared.
func TestWithRegistryDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		providers := map[string]*provider{
			"10.0.0.1": newProvider("10.0.0.1:20880", alwaysFail(errRefused)),
			"10.0.0.2": newProvider("10.0.0.2:20880", nil),
		}
		dir, err := cluster.NewRegistryDirectory(func(in subscriber.Instance) (cluster.Invoker, error) {
			return providers[in.IP], nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		rec := newRecorder()
		f := mustNew(t, dir, withObserver(rec.hooks()))
		defer mustClose(t, f)

		up := func(ip string) subscriber.Instance {
			return subscriber.Instance{IP: ip, Port: 20880, Healthy: true, Enabled: true}
		}
		var listener func([]subscriber.Instance) = dir.Update
		listener([]subscriber.Instance{up("10.0.0.1")})
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		listener([]subscriber.Instance{up("10.0.0.2")}) // the failing provider is replaced
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := rec.get("succeeded"); len(s) != 1 || s[0].Target != "10.0.0.2:20880" || s[0].Attempts != 2 {
			t.Fatalf("succeeded %+v; want the first retry to reach 10.0.0.2", s)
		}
		if n := len(providers["10.0.0.1"].snapshot()); n != 1 {
			t.Errorf("removed provider called %d times, want 1", n)
		}
	})
}
