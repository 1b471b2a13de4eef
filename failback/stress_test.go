package failback

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestStress runs 10,000 calls from 50 goroutines against providers with
// random outcomes (success, retryable and business errors, Retry-After,
// panics, slow attempts that honour or ignore their ctx), with hooks that
// are slow or panic at random, per-call TTLs, a full queue, and Shutdown
// and Close racing each other and the callers. It checks that every call
// ends exactly once, in order: no hook for a call that succeeded at once
// or whose error Invoke returned; only Dropped for a call Invoke rejected;
// Queued, then Retried*, then exactly one of Succeeded, GaveUp, Dropped
// for a queued one; nothing after Close returns; and that Stats add up and
// agree with the hooks.
func TestStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers = 50
			perCall = 200
		)
		type record struct {
			events   []string
			firstOK  bool
			panicked bool // the first attempt panicked in Invoke
			err      error
		}
		var (
			mu      sync.Mutex
			calls   = map[*cluster.Invocation]*record{}
			closed  bool // Close has returned
			lateEvs []string
		)
		rnd := func() float64 { return rand.Float64() }
		add := func(inv *cluster.Invocation, ev string) {
			mu.Lock()
			defer mu.Unlock()
			if closed {
				lateEvs = append(lateEvs, ev+" "+inv.Method)
			}
			r := calls[inv]
			r.events = append(r.events, ev)
		}
		behave := func(ctx context.Context, c call) (any, error) {
			x := rnd()
			if c.first {
				switch {
				case x < 0.30:
					mu.Lock()
					calls[c.inv].firstOK = true
					mu.Unlock()
					return "ok", nil
				case x < 0.32:
					panic("first attempt exploded")
				case x < 0.40:
					return nil, errors.New("400 bad request")
				}
				return nil, errRefused
			}
			switch {
			case x < 0.35:
				return "ok", nil
			case x < 0.40:
				nilMapPanic(nil) // panics: assignment to entry in nil map
			case x < 0.45:
				return nil, errors.New("400 bad request")
			case x < 0.50:
				return nil, rebound.RetryAfter(time.Duration(rand.IntN(3000))*time.Millisecond, errRefused)
			case x < 0.55:
				select { // slow, honours ctx
				case <-time.After(time.Duration(rand.IntN(3000)) * time.Millisecond):
					return nil, errRefused
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			case x < 0.57:
				time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond) // slow, ignores ctx
				return "ok", nil
			}
			return nil, errRefused
		}
		p1, p2 := newProvider("a:1", behave), newProvider("b:2", behave)
		hookPanic := func(inv *cluster.Invocation, ev string) {
			add(inv, ev)
			if x := rnd(); x < 0.02 {
				panic("hook exploded in " + ev)
			} else if x < 0.05 {
				time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			}
		}
		hooks := testHooks{
			Queued:    func(tk Task) { hookPanic(tk.Invocation, "queued") },
			Retried:   func(tk Task) { hookPanic(tk.Invocation, "retried") },
			Succeeded: func(tk Task) { hookPanic(tk.Invocation, "succeeded") },
			GaveUp:    func(tk Task) { hookPanic(tk.Invocation, "gaveup") },
			Dropped:   func(tk Task) { hookPanic(tk.Invocation, "dropped:"+label(tk.Reason)) },
		}
		f := mustNew(t, cluster.NewStaticDirectory(p1, p2), withObserver(hooks), WithMaxTasks(400), WithConcurrency(8),
			WithAttemptTimeout(time.Second), WithTTL(2*time.Second),
			WithPolicy(rebound.Policy{Initial: 200 * time.Millisecond, Max: 2 * time.Second}, rebound.WithMaxAttempts(6)))

		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				for i := range perCall {
					inv := &cluster.Invocation{Method: fmt.Sprintf("c%d-%d", g, i)}
					r := &record{}
					mu.Lock()
					calls[inv] = r
					mu.Unlock()
					ctx := callerCtx()
					func() {
						defer func() {
							if v := recover(); v != nil {
								mu.Lock()
								r.panicked = true
								mu.Unlock()
							}
						}()
						_, err := f.Invoke(ctx, inv)
						mu.Lock()
						r.err = err
						mu.Unlock()
					}()
					time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
				}
			})
		}
		// Shutdown and Close race the callers and each other.
		time.Sleep(9 * time.Second) // callers run for about 10 s
		var closers sync.WaitGroup
		closers.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = f.Shutdown(ctx)
		})
		closers.Go(func() {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond)
			_ = f.Close()
		})
		closers.Wait()
		mu.Lock()
		closed = true
		mu.Unlock()
		wg.Wait()
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		if len(lateEvs) > 0 {
			t.Fatalf("%d hooks after Close returned: %v", len(lateEvs), lateEvs[:min(5, len(lateEvs))])
		}
		var offered, succeeded, gaveUp uint64
		dropped := map[error]uint64{}
		queuedCalls, bad := 0, 0
		for inv, r := range calls {
			evs := strings.Join(r.events, " ")
			fail := func(why string) {
				if bad++; bad <= 10 {
					t.Errorf("%s: %s: events %q, Invoke err %v, first ok %v, panicked %v", inv.Method, why, evs, r.err, r.firstOK, r.panicked)
				}
			}
			var rej *rejectedError
			switch {
			case r.panicked || r.firstOK || (r.err != nil && !errors.As(r.err, &rej)):
				if len(r.events) != 0 {
					fail("hooks for a call that was never handed to the background")
				}
				continue
			case rej != nil:
				if evs != "dropped:"+label(rej.Reason) {
					fail("a rejected call must get exactly one Dropped with its reason")
				}
				offered++
				dropped[rej.Reason]++
				continue
			}
			// Invoke returned (nil, nil) after a failed first attempt: queued.
			queuedCalls++
			offered++
			n := len(r.events)
			if n < 2 || r.events[0] != "queued" {
				fail("a queued call must start with Queued and end with a final hook")
				continue
			}
			for _, ev := range r.events[1 : n-1] {
				if ev != "retried" {
					fail("only Retried between Queued and the final hook")
				}
			}
			switch last := r.events[n-1]; {
			case last == "succeeded":
				succeeded++
			case last == "gaveup":
				gaveUp++
			case strings.HasPrefix(last, "dropped:"):
				dropped[dropReason(strings.TrimPrefix(last, "dropped:")).sentinel()]++
			default:
				fail("no final hook")
			}
		}
		s := f.Stats()
		checkStats(t, s)
		if s.Queued != 0 || s.InFlight != 0 || s.Offered != offered || s.Succeeded != succeeded || s.GaveUp != gaveUp {
			t.Errorf("stats %+v; hooks say offered %d, succeeded %d, gave up %d", s, offered, succeeded, gaveUp)
		}
		for _, r := range dropReasons {
			if e := r.sentinel(); s.Dropped[e] != dropped[e] {
				t.Errorf("Dropped[%s] = %d, hooks say %d", r, s.Dropped[e], dropped[e])
			}
		}
		t.Logf("%d calls: %d queued; stats %+v", len(calls), queuedCalls, s)
		if len(calls) != callers*perCall || queuedCalls < 1000 || s.Retried < 1000 || s.GaveUp == 0 ||
			s.Dropped[ErrClosed] == 0 || s.Dropped[ErrExpired] == 0 || s.Dropped[ErrQueueFull] == 0 {
			t.Errorf("the stress did not reach every path: %+v", s)
		}
	})
}
