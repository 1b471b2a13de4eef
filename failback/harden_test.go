package failback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Regression tests for issue 14 (items 1-8, 11 and the "also check"
// paragraph), in its order. Each failed before its fix.

// panicky panics in List, Select or Invoke on retries when told to.
type panicky struct {
	where atomic.Value // string: "list", "select", "invoke", ""
	p     *provider
}

func (d *panicky) List(context.Context, *cluster.Invocation) ([]cluster.Invoker, error) {
	if d.where.Load() == "list" {
		nilMapPanic(nil) // panics: assignment to entry in nil map
	}
	return []cluster.Invoker{d.p}, nil
}

func (d *panicky) Select(ivs []cluster.Invoker, _ *cluster.Invocation, _ []cluster.Invoker) (cluster.Invoker, error) {
	if d.where.Load() == "select" {
		panic(errors.New("select exploded"))
	}
	return ivs[0], nil
}

// Item 1: a panic in a background retry crashed the process. Now the call
// ends in GaveUp with a *cluster.PanicError (value and stack), and the worker keeps
// serving other calls.
func TestPanicInRetryIsRecovered(t *testing.T) {
	for _, where := range []string{"list", "select", "invoke", "hook"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &panicky{}
				d.where.Store("")
				var hookPanics atomic.Bool
				d.p = newProvider("a:1", func(_ context.Context, c call) (any, error) {
					if c.first {
						return nil, errRefused
					}
					if where == "invoke" && c.inv.Method == "boom" {
						nilMapPanic(nil) // panics: assignment to entry in nil map
					}
					return "ok", nil
				})
				rec := newRecorder()
				hooks := rec.hooks()
				succeeded := hooks.Succeeded
				hooks.Succeeded = func(tk Task) {
					if hookPanics.Load() && tk.Invocation.Method == "boom" {
						panic("hook exploded")
					}
					succeeded(tk)
				}
				f := mustNew(t, d, WithLoadBalance(d), withObserver(hooks), WithConcurrency(1))
				defer mustClose(t, f)
				if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "boom"}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				switch where {
				case "hook":
					hookPanics.Store(true)
				case "list", "select":
					d.where.Store(where)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				d.where.Store("")

				if where == "hook" {
					// A panic in a final hook: the call has ended, the worker lives.
					if s := f.Stats(); s.Succeeded != 1 {
						t.Fatalf("stats %+v", s)
					}
				} else {
					g := rec.get("gaveup")
					var pe *cluster.PanicError
					if len(g) != 1 || !errors.Is(g[0].Err, errPanicked) || !errors.As(g[0].Err, &pe) ||
						len(pe.Stack) == 0 || !strings.Contains(fmt.Sprint(pe.Value), map[string]string{
						"list": "nil map", "select": "select exploded", "invoke": "nil map"}[where]) {
						t.Fatalf("gave up %+v; want one GaveUp carrying a *cluster.PanicError with value and stack", g)
					}
				}
				// The only worker is alive: the next call is retried.
				if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "next"}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := rec.get("succeeded"); len(got) == 0 || got[len(got)-1].Invocation.Method != "next" {
					t.Fatalf("succeeded %+v; want the next call retried by the surviving worker", got)
				}
				checkStats(t, f.Stats())
			})
		})
	}
	t.Run("retried hook", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", alwaysFail(errRefused))
			rec := newRecorder()
			hooks := rec.hooks()
			hooks.Retried = func(Task) { panic("retried hook exploded") }
			f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(hooks))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
			time.Sleep(time.Hour)
			synctest.Wait()
			g := rec.get("gaveup")
			var pe *cluster.PanicError
			if len(g) != 1 || !errors.As(g[0].Err, &pe) || pe.Op != "failback observer (retry)" {
				t.Fatalf("gave up %+v; want the call given up with the hook's panic", g)
			}
			if n := len(p.snapshot()); n != 2 {
				t.Errorf("%d attempts; want 2 (no retry after the hook panicked)", n)
			}
			checkStats(t, f.Stats())
		})
	})
}

// Item 2: Retried fired after the task was back on the heap, so another
// worker could report Succeeded first (and read the task concurrently:
// a data race under -race). Hooks of one call are now totally ordered.
func TestHooksOfOneCallAreOrdered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.first || n.Add(1) == 1 {
				return nil, errRefused
			}
			return "ok", nil
		})
		var mu sync.Mutex
		var seq []string
		hooks := testHooks{
			Queued: func(Task) { mu.Lock(); seq = append(seq, "queued"); mu.Unlock() },
			Retried: func(Task) {
				time.Sleep(time.Second) // a slow hook: the next retry is due long before it returns
				mu.Lock()
				seq = append(seq, "retried")
				mu.Unlock()
			},
			Succeeded: func(Task) { mu.Lock(); seq = append(seq, "succeeded"); mu.Unlock() },
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(hooks), WithConcurrency(4),
			WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: rebound.NoJitter}))
		defer mustClose(t, f)
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := strings.Join(seq, " "); got != "queued retried succeeded" {
			t.Fatalf("hooks %q; want queued retried succeeded", got)
		}
	})
}

// Item 3: a panicking Queued hook leaked its task slot for ever (Stats kept
// Queued:1, the next call got ErrQueueFull with WithMaxTasks(1), and no
// final hook fired).
func TestQueuedHookPanicDoesNotLeakSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		hooks := rec.hooks()
		queued := hooks.Queued
		hooks.Queued = func(tk Task) {
			queued(tk)
			if tk.Invocation.Method == "first" {
				panic("queued hook exploded")
			}
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(hooks), WithMaxTasks(1))
		defer mustClose(t, f)
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "first"}); err != nil {
			t.Fatalf("Invoke = %v; want (nil, nil): Queued was called", err)
		}
		s := f.Stats()
		checkStats(t, s)
		if s.Queued != 0 || s.GaveUp != 1 {
			t.Fatalf("stats %+v; want the slot free and the call given up", s)
		}
		g := rec.get("gaveup")
		if len(g) != 1 || !errors.Is(g[0].Err, errPanicked) {
			t.Fatalf("gave up %+v", g)
		}
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "second"}); err != nil {
			t.Fatalf("second Invoke = %v; want it queued (the slot was leaked)", err)
		}
	})
}

// Item 4: Queued fired, then Invoke returned *rejectedError(closed), and
// Close returned before that call was reported. Now Queued means (nil,
// nil), and Close returns only after the call's Dropped.
func TestQueuedCallReportedBeforeCloseReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(errRefused))
		inHook, release := make(chan struct{}), make(chan struct{})
		rec := newRecorder()
		hooks := rec.hooks()
		queued := hooks.Queued
		hooks.Queued = func(tk Task) {
			queued(tk)
			close(inHook)
			<-release
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(hooks))
		invoked := make(chan error)
		go func() {
			_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
			invoked <- err
		}()
		<-inHook
		closed := make(chan struct{})
		go func() { _ = f.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a queued call was still being reported")
		default:
		}
		close(release)
		if err := <-invoked; err != nil {
			t.Fatalf("Invoke = %v; want (nil, nil) after Queued", err)
		}
		<-closed
		if rec.dropped[ErrClosed] != 1 {
			t.Fatalf("hooks %v; want the call dropped (closed) before Close returned", rec.events)
		}
		checkStats(t, f.Stats())
	})
}

// Item 5: a task whose last attempt gave up for its own reason while Close
// ran was reported Dropped(closed), so a user re-sending closed calls would
// re-send bad requests. It is GaveUp with its real reason now.
func TestGiveUpDuringCloseIsGaveUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error // what the cancelled attempt returns
		reason error
		policy Option
	}{
		{"not retryable", errors.New("400 bad request"), errNotRetryable, WithPolicy(DefaultPolicy(), rebound.WithMaxAttempts(4))},
		{"exhausted", errRefused, rebound.ErrExhausted, WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				running := make(chan struct{})
				p := newProvider("a:1", func(ctx context.Context, c call) (any, error) {
					if c.first {
						return nil, errRefused
					}
					close(running)
					<-ctx.Done()
					return nil, tc.err
				})
				rec := newRecorder()
				f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), tc.policy)
				_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
				<-running
				mustClose(t, f)
				g := rec.get("gaveup")
				if len(g) != 1 || rec.count("dropped") != 0 || !errors.Is(g[0].Err, tc.reason) {
					t.Fatalf("hooks %v, gave up %+v; want GaveUp for %v", rec.events, g, tc.reason)
				}
				checkStats(t, f.Stats())
			})
		})
	}
}

// Item 6: the ready queue's backing array grew without bound under a
// sustained backlog (len(ready) = 10049 after 20 s with 50 tasks and one
// slow worker). It is compacted now, within a small multiple of the task
// limit.
func TestReadyQueueStaysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if !c.first {
				time.Sleep(10 * time.Millisecond)
			}
			return nil, errRefused
		})
		const tasks = 50
		f := mustNew(t, cluster.NewStaticDirectory(p), WithConcurrency(1), WithMaxTasks(tasks),
			WithPolicy(rebound.Policy{Initial: minDelay, Max: minDelay, Jitter: rebound.NoJitter}))
		defer mustClose(t, f)
		for range tasks {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
				t.Fatal(err)
			}
		}
		maxCap := 0
		for range 20 {
			time.Sleep(time.Second)
			f.mu.Lock()
			maxCap = max(maxCap, cap(f.ready))
			f.mu.Unlock()
		}
		if s := f.Stats(); s.Retried < 1900 {
			t.Fatalf("stats %+v; want a sustained backlog (about 2,000 retries)", s)
		}
		if maxCap > 4*tasks+32 {
			t.Fatalf("ready queue capacity reached %d with %d tasks; want at most %d", maxCap, tasks, 4*tasks+32)
		}
	})
}

// Item 7: "Retry-After: 4294967295" held every slot for 136 years with the
// default options and new calls got ErrQueueFull. A Retry-After is capped
// at 5 min (or the policy's Max, if larger), the rule of package rebound.
func TestHugeRetryAfterIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(rebound.RetryAfter(4294967295*time.Second, errRefused)))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithMaxTasks(1))
		defer mustClose(t, f)
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
		for _, tk := range rec.get("queued") {
			if tk.Delay != 5*time.Minute {
				t.Errorf("queued with delay %v; want the 5 min cap", tk.Delay)
			}
		}
		time.Sleep(16 * time.Minute) // 3 retries, each at most 5 min later
		synctest.Wait()
		if s := f.Stats(); s.GaveUp != 1 || s.Retried != 3 {
			t.Fatalf("stats %+v; want the task retried 3 times and given up within 15 min", s)
		}
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "next"}); err != nil {
			t.Fatalf("Invoke after the capped task ended = %v; want it queued", err)
		}
	})
}

// Item 8: MaxElapsed was not checked when an attempt started, so time
// spent waiting for a worker did not count: a task was attempted 10 s
// after its first failure with MaxElapsed 2 s.
func TestMaxElapsedCheckedAtAttemptStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if !c.first && c.inv.Method == "slow" {
				time.Sleep(10 * time.Second) // holds the only worker
				return "ok", nil
			}
			return nil, errRefused
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithConcurrency(1),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxElapsed(2*time.Second)))
		defer mustClose(t, f)
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "slow"})
		time.Sleep(500 * time.Millisecond)
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "late"}) // due at 1.5 s, worker busy until 11 s
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, c := range p.retries() {
			if c.inv.Method == "late" {
				t.Fatalf("late task attempted at %v, after its MaxElapsed (2 s from its first failure at 0.5 s)", c.at)
			}
		}
		g := rec.get("gaveup")
		if len(g) != 1 || g[0].Invocation.Method != "late" || !errors.Is(g[0].Err, rebound.ErrExhausted) || g[0].Attempts != 1 {
			t.Fatalf("gave up %+v; want the late task, ErrExhausted, after its one attempt", g)
		}
		if s := f.Stats(); s.Retried != 1 {
			t.Errorf("stats %+v; want one retry started (the slow one)", s)
		}
	})
}

// Item 11: Close on an already-stopped invoker returned nil or
// context.Canceled at random when its ctx was done. Shutdown of an invoker
// stopped by Close returns ErrClosed, always (see also
// TestShutdownAfterCloseIsOrderFree).
func TestShutdownOfStoppedInvokerIsDeterministic(t *testing.T) {
	f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", nil)))
	mustClose(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		if err := f.Shutdown(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("Shutdown of a closed invoker with a done ctx = %v; want ErrClosed", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Also check: a second concurrent Close returned while the first one was
// still running Dropped hooks.
func TestConcurrentCloseWaitsForFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(errRefused))
		inHook, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(testHooks{Dropped: func(Task) {
			once.Do(func() { close(inHook) })
			<-release
		}}))
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
		go func() { _ = f.Close() }()
		<-inHook
		second := make(chan struct{})
		go func() { _ = f.Close(); close(second) }()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("second Close returned while the first was still reporting")
		default:
		}
		close(release)
		<-second
	})
}

// Shutdown drains: queued calls keep their schedule until they end, new
// calls are refused, and Shutdown returns nil once all have ended.
func TestShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", downUntil(5*time.Second))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: 2 * time.Second, Max: 2 * time.Second, Jitter: rebound.NoJitter}))
		for i := range 10 {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		done := make(chan error)
		go func() { done <- f.Shutdown(context.Background()) }()
		synctest.Wait()
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); !errors.Is(err, ErrClosed) || !errors.Is(err, rebound.ErrClosed) {
			t.Fatalf("Invoke during Shutdown = %v; want ErrClosed", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		if got := time.Since(start); got != 6*time.Second {
			t.Errorf("Shutdown returned after %v; want 6s (the retry at 6 s succeeds)", got)
		}
		if rec.count("succeeded") != 10 || rec.count("dropped") != 0 {
			t.Fatalf("hooks %v; want all 10 succeeded", rec.events)
		}
		checkStats(t, f.Stats())
	})
}

// Item 2, second half: with no Queued hook, Invoke's Debug log read the
// task (t.lastErr) after pushing it, while a worker could already be
// writing it: a data race under -race. The task is now filed only after
// it has been logged and reported.
// It runs in real time: the race needs a worker to run the task while
// Invoke is still logging it.
func TestQueuedLogDoesNotRaceWorker(t *testing.T) {
	func() {
		p := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithLogger(zap.New(zapcore.NewNopCore()).WithOptions(
			zap.WrapCore(func(zapcore.Core) zapcore.Core { return debugCore{} }))), WithConcurrency(8),
			WithPolicy(rebound.Policy{Initial: minDelay, Max: minDelay, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(3)))
		defer mustClose(t, f)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
				}
			})
		}
		wg.Wait()
		if err := f.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkStats(t, f.Stats())
	}()
}

// debugCore is a zap core that is enabled at Debug and encodes every field
// (so that the log reads the task) but writes nothing.
type debugCore struct{}

func (debugCore) Enabled(zapcore.Level) bool          { return true }
func (c debugCore) With([]zapcore.Field) zapcore.Core { return c }
func (c debugCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (debugCore) Write(_ zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	return nil
}
func (debugCore) Sync() error { return nil }

// Close during a Shutdown's drain stops it at once: Shutdown returns
// ErrClosed (it used to wait for its ctx), and the queued calls are
// reported dropped.
func TestCloseCutsShutdownShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: time.Hour, Max: time.Hour, Jitter: rebound.NoJitter}))
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
		done := make(chan error)
		go func() { done <- f.Shutdown(context.Background()) }()
		synctest.Wait()
		mustClose(t, f)
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Shutdown cut by Close = %v; want ErrClosed", err)
		}
		if rec.dropped[ErrClosed] != 1 {
			t.Fatalf("hooks %v", rec.events)
		}
	})
}

// nilMapPanic panics with a runtime error (assignment to entry in nil map)
// when given a nil map: the test's stand-in for a bug in user code, passed
// through a parameter so that staticcheck (SA5000) does not flag the
// intentional panic.
func nilMapPanic(m map[string]int) { m["x"] = 1 }
