package failback

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Close or Shutdown called from one of the invoker's own hooks used to
// deadlock (newuser item 6): Queued runs while Invoke holds a reservation
// that Close waits for, the worker hooks run on a goroutine Close waits
// for, and the Dropped hooks of Close's own report ran a nested Close that
// waited for the outer one. Now they start the stop, return
// rebound.ErrCalledFromCallback at once, and the stop finishes after the hook returns.
// On the old code every case below deadlocks (synctest reports "deadlock:
// all goroutines in bubble are blocked"), except dropped-queue-full, which
// runs on Invoke's goroutine outside any reservation and did not deadlock.
func TestCloseFromHook(t *testing.T) {
	stops := map[string]func(*Invoker) error{
		"Close":    (*Invoker).Close,
		"Shutdown": func(f *Invoker) error { return f.Shutdown(context.Background()) },
	}
	type scenario struct {
		hook     string // which hook calls stop
		behave   func(context.Context, call) (any, error)
		opts     []Option
		calls    int
		outside  bool   // the test calls Close itself (the hook runs during it)
		wantLast string // the final hook of the first call
	}
	failFirst := func(_ context.Context, c call) (any, error) {
		if c.first {
			return nil, errRefused
		}
		return "ok", nil
	}
	scenarios := map[string]scenario{
		"queued":             {hook: "queued", behave: alwaysFail(errRefused), calls: 1},
		"retried":            {hook: "retried", behave: alwaysFail(errRefused), opts: []Option{retries(3)}, calls: 1},
		"succeeded":          {hook: "succeeded", behave: failFirst, calls: 1, wantLast: "succeeded"},
		"gaveup":             {hook: "gaveup", behave: alwaysFail(errRefused), opts: []Option{retries(1)}, calls: 1, wantLast: "gaveup"},
		"dropped-by-close":   {hook: "dropped", behave: alwaysFail(errRefused), calls: 2, outside: true, wantLast: "dropped"},
		"dropped-queue-full": {hook: "dropped", behave: alwaysFail(errRefused), opts: []Option{WithMaxTasks(1)}, calls: 2},
	}
	for name, sc := range scenarios {
		for how, stop := range stops {
			t.Run(name+"/"+how, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var (
						mu      sync.Mutex
						events  []string
						once    atomic.Bool // not a sync.Once: a nested hook call must not wait for it
						stopErr error
						invErr  error
						f       *Invoker
						called  = make(chan struct{})
					)
					record := func(kind string) {
						mu.Lock()
						events = append(events, kind)
						mu.Unlock()
						if kind == sc.hook {
							if once.CompareAndSwap(false, true) {
								stopErr = stop(f)
								// The stop has begun: nothing new is attempted.
								_, invErr = f.Invoke(callerCtx(), &cluster.Invocation{Method: "late"})
								close(called)
							}
						}
					}
					hooks := testHooks{
						Queued:    func(Task) { record("queued") },
						Retried:   func(Task) { record("retried") },
						Succeeded: func(Task) { record("succeeded") },
						GaveUp:    func(Task) { record("gaveup") },
						Dropped:   func(Task) { record("dropped") },
					}
					p := newProvider("a:1", sc.behave)
					opts := append([]Option{withObserver(hooks), WithConcurrency(1)}, sc.opts...)
					f = mustNew(t, cluster.NewStaticDirectory(p), opts...)
					for range sc.calls {
						_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
					}
					if sc.outside {
						mustClose(t, f)
					}
					// Wait (virtual time) for the hook to have called stop;
					// on the old code synctest reports the deadlock here.
					<-called
					gotStop := stopErr
					if !errors.Is(gotStop, rebound.ErrCalledFromCallback) {
						t.Fatalf("%s from the %s hook = %v, want rebound.ErrCalledFromCallback", how, sc.hook, gotStop)
					}
					if !errors.Is(invErr, ErrClosed) {
						t.Errorf("Invoke after %s from a hook = %v, want ErrClosed", how, invErr)
					}
					// A Close from outside a hook waits for the stop to end.
					if err := f.Close(); err != nil {
						t.Fatalf("Close after %s from a hook = %v", how, err)
					}
					s := f.Stats()
					checkStats(t, s)
					if s.Queued != 0 || s.InFlight != 0 {
						t.Errorf("after Close: %+v, want nothing pending", s)
					}
					mu.Lock()
					got := append([]string(nil), events...)
					mu.Unlock()
					if len(got) == 0 || got[len(got)-1] != lastWant(sc.wantLast) {
						t.Errorf("hooks %v, want the last one %q", got, lastWant(sc.wantLast))
					}
					// No hook after Close returned.
					synctest.Wait()
					mu.Lock()
					after := len(events)
					mu.Unlock()
					if after != len(got) {
						t.Errorf("hooks after Close returned: %v", events[len(got):])
					}
				})
			})
		}
	}
}

func lastWant(s string) string {
	if s == "" {
		return "dropped"
	}
	return s
}

// A Shutdown or Close from a hook with a nil ctx is still an argument
// error and stops nothing.
func TestShutdownFromHookNilCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var err error
		var f *Invoker
		f = mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))),
			withObserver(testHooks{Queued: func(Task) {
				//lint:ignore SA1012 the test checks that a nil ctx is rejected with an error
				err = f.Shutdown(nil)
			}}))
		defer mustClose(t, f)
		if _, e := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); e != nil {
			t.Fatal(e)
		}
		if errors.Is(err, rebound.ErrCalledFromCallback) || err == nil {
			t.Fatalf("Shutdown(nil) from a hook = %v, want an ArgumentError", err)
		}
		if _, e := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); errors.Is(e, ErrClosed) {
			t.Fatalf("Invoke after Shutdown(nil) = %v: it stopped the invoker", e)
		}
	})
}
