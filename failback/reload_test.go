package failback

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Shutdown after Close returned nil, and ErrClosed when a Shutdown had
// begun before the Close. It now says how the invoker ended, whatever the
// order: ErrClosed once Close stopped it before a drain completed, nil
// after a completed drain, ctx.Err() for the Shutdown whose ctx ended it.
func TestShutdownAfterCloseIsOrderFree(t *testing.T) {
	slow := rebound.Policy{Initial: time.Hour, Max: time.Hour, Jitter: rebound.NoJitter}
	queued := func(t *testing.T, f *Invoker) {
		t.Helper()
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("close then shutdown", func(t *testing.T) {
		for _, pending := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), WithPolicy(slow))
				if pending {
					queued(t, f)
				}
				mustClose(t, f)
				for range 3 {
					if err := f.Shutdown(context.Background()); !errors.Is(err, ErrClosed) {
						t.Fatalf("pending %v: Shutdown after Close = %v; want ErrClosed", pending, err)
					}
				}
			})
		}
	})
	t.Run("shutdown cut by close, then shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), WithPolicy(slow))
			queued(t, f)
			done := make(chan error)
			go func() { done <- f.Shutdown(context.Background()) }()
			synctest.Wait()
			mustClose(t, f)
			if err := <-done; !errors.Is(err, ErrClosed) {
				t.Fatalf("Shutdown cut by Close = %v; want ErrClosed", err)
			}
			if err := f.Shutdown(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("Shutdown after that = %v; want ErrClosed", err)
			}
		})
	})
	t.Run("drained, close, shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", downUntil(time.Minute))), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(0)))
			queued(t, f)
			if err := f.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown that drained = %v; want nil", err)
			}
			mustClose(t, f)
			if err := f.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown after a drain and a Close = %v; want nil", err)
			}
		})
	})
	t.Run("deadline, then shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), WithPolicy(slow))
			queued(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := f.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown past its deadline = %v; want DeadlineExceeded", err)
			}
			if err := f.Shutdown(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("Shutdown after that = %v; want ErrClosed", err)
			}
		})
	})
}

// An empty caller-supplied idempotency key was kept: every call that left
// it empty shared the key "", so a provider deduplicating by key dropped
// all but the first. An empty key now counts as none.
func TestEmptyIdempotencyKeyIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		p := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil))
		defer mustClose(t, f)
		for range 2 {
			inv := &cluster.Invocation{Method: "m", Attachments: map[string]string{IdempotencyKey: ""}}
			if _, err := f.Invoke(callerCtx(), inv); err != nil {
				t.Fatal(err)
			}
			if inv.Attachments[IdempotencyKey] != "" {
				t.Fatal("the caller's Invocation was modified")
			}
		}
		calls, _ := st.snapshot()
		keys := map[string]bool{}
		for _, c := range calls {
			keys[c.Attachments[IdempotencyKey]] = true
		}
		if len(keys) != 2 || keys[""] {
			t.Fatalf("stored keys %v; want two distinct non-empty keys", keys)
		}
		for _, a := range p.snapshot() {
			if k := a.inv.Attachments[IdempotencyKey]; !keys[k] {
				t.Errorf("attempt sent with key %q", k)
			}
		}
	})
}

// Stored Due and Born times were reloaded as written: after the clock of
// the storing process was corrected by a day, a call with a one-minute
// backoff waited a day and a one-hour TTL lasted 25 hours. Both are
// clamped to the reloading process's now.
func TestReloadClampsTimesFromAClockAhead(t *testing.T) {
	t.Run("due", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newMemStore()
			ahead := time.Now().Add(24 * time.Hour)
			st.Add(StoredCall{Method: "m", Args: []byte(`[]`), Attempts: 1, Born: ahead, Due: ahead.Add(time.Minute)})
			p := newProvider("a:1", nil)
			f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil)) // DefaultPolicy: Max 1 min, MaxRetryAfter 5 min
			defer mustClose(t, f)
			time.Sleep(5*time.Minute + time.Second)
			synctest.Wait()
			if n := len(p.snapshot()); n != 1 {
				t.Fatalf("%d attempts in the 5 min after the restart; want 1 (the due time clamped to now + the policy's longest wait)", n)
			}
			if s := f.Stats(); s.Succeeded != 1 {
				t.Fatalf("stats %+v", s)
			}
		})
	})
	t.Run("ttl", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newMemStore()
			ahead := time.Now().Add(24 * time.Hour)
			st.Add(StoredCall{Method: "m", Args: []byte(`[]`), Attempts: 1, Born: ahead, Due: time.Now()})
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), WithStore(st, nil), WithTTL(time.Hour),
				WithPolicy(rebound.Policy{Initial: 10 * time.Minute, Max: 10 * time.Minute, Jitter: rebound.NoJitter}), withObserver(rec.hooks()))
			defer mustClose(t, f)
			time.Sleep(2 * time.Hour)
			synctest.Wait()
			if s := f.Stats(); s.Dropped[ErrExpired] != 1 || s.Queued != 0 {
				t.Fatalf("two hours after the restart: stats %+v; want the call expired (a 1 h TTL from now at the latest)", s)
			}
			if d := rec.get("dropped"); len(d) != 1 || d[0].Age > time.Hour+time.Minute {
				t.Fatalf("dropped %+v; want one, aged about 1 h", d)
			}
		})
	})
}

// Closing the transport under the invoker (a gRPC ClientConn closed before
// it) made every queued call a give-up, removed from the store. An error
// marked Stopping ends the call with Dropped(closed) and keeps it stored
// for the next process; a Permanent mark under it does not count.
func TestStoppingKeepsCallsStored(t *testing.T) {
	closing := errors.New("rpc error: code = Canceled desc = grpc: the client connection is closing")
	t.Run("retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newMemStore()
			p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
				if c.first {
					return nil, errRefused
				}
				return nil, Stopping(rebound.Permanent(closing))
			})
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), withObserver(rec.hooks()))
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Hour)
			synctest.Wait()
			s := f.Stats()
			checkStats(t, s)
			calls, _ := st.snapshot()
			if s.GaveUp != 0 || s.Dropped[ErrClosed] != 1 || len(calls) != 1 || rec.dropped[ErrClosed] != 1 {
				t.Fatalf("stats %+v, %d stored, hooks %v; want Dropped(closed), the call still stored", s, len(calls), rec.events)
			}
			if n := len(p.snapshot()); n != 2 {
				t.Errorf("%d attempts; want 2 (no retry after the transport stopped)", n)
			}
			mustClose(t, f)
			if calls, _ := st.snapshot(); len(calls) != 1 || calls[1].Attempts != 1 {
				t.Fatalf("after Close: %+v; want the call stored with its one attempt", calls)
			}
		})
	})
	t.Run("first attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stopping := newProvider("a:1", func(context.Context, call) (any, error) { return nil, Stopping(rebound.Permanent(closing)) })
			st := newMemStore()
			f := mustNew(t, cluster.NewStaticDirectory(stopping), WithStore(st, nil))
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
				t.Fatalf("with a store: Invoke = %v; want the call queued (stored)", err)
			}
			mustClose(t, f)
			if calls, _ := st.snapshot(); len(calls) != 1 {
				t.Fatalf("with a store: %d stored after Close; want 1", len(calls))
			}
			g := mustNew(t, cluster.NewStaticDirectory(stopping))
			defer mustClose(t, g)
			if _, err := g.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); !isStopping(err) || !errors.Is(err, closing) {
				t.Fatalf("without a store: Invoke = %v; want the error unchanged", err)
			}
			if s := g.Stats(); s.Offered != 0 {
				t.Fatalf("without a store: %+v; want nothing queued", s)
			}
		})
	})
	if Stopping(nil) != nil || isStopping(nil) || isStopping(closing) {
		t.Error("Stopping(nil) or IsStopping wrong")
	}
	if err := Stopping(closing); err.Error() != closing.Error() || !errors.Is(err, errStopping) {
		t.Errorf("Stopping(err) = %v", err)
	}
}

// One record New could not decode made it fail for the whole store, with
// an error that did not say which record. It names the record now, and
// WithQuarantine sets bad records aside (counted in Stats.Quarantined) so
// that the others load.
func TestBadStoredRecords(t *testing.T) {
	fill := func() *memStore {
		st := newMemStore()
		now := time.Now()
		st.Add(StoredCall{Method: "good", Args: []byte(`[1]`), Attempts: 1, Born: now, Due: now})
		st.Add(StoredCall{Method: "notify", Args: []byte(`not json`), Attempts: 1, Born: now, Due: now})
		st.Add(StoredCall{Method: "torn", Attempts: 1, Born: now, Due: now})
		st.Add(StoredCall{Method: "good", Args: []byte(`[2]`), Attempts: 1, Born: now, Due: now})
		st.bad = map[uint64]error{3: errors.New("boltstore: corrupt record: calls.db: bucket \"failback-calls\" key 0000000000000003: truncated")}
		return st
	}
	dir := cluster.NewStaticDirectory(newProvider("a:1", nil))

	_, err := New(dir, WithStore(fill(), nil))
	var bre *badRecordError
	if !errors.Is(err, ErrStore) || !errors.Is(err, ErrBadRecord) || !errors.As(err, &bre) || bre.ID != 2 || bre.Method != "notify" ||
		!strings.Contains(err.Error(), `stored call 2 (method "notify")`) || !strings.Contains(err.Error(), "WithQuarantine") {
		t.Fatalf("New = %v; want ErrStore and a *badRecordError naming call 2, notify", err)
	}
	st := newMemStore()
	st.Add(StoredCall{Method: "torn"})
	st.bad = map[uint64]error{1: errors.New(`calls.db: bucket "failback-calls" key 0000000000000001: truncated`)}
	if _, err := New(dir, WithStore(st, nil)); !errors.As(err, &bre) || bre.ID != 1 || !strings.Contains(err.Error(), `key 0000000000000001`) {
		t.Fatalf("New on a record the store cannot decode = %v; want a *badRecordError with the store's words", err)
	}

	synctest.Test(t, func(t *testing.T) {
		st := fill()
		f := mustNew(t, dir, WithStore(st, nil), WithQuarantine())
		defer mustClose(t, f)
		s := f.Stats()
		if s.Quarantined != 2 || s.Offered != 2 {
			t.Fatalf("with WithQuarantine: %+v; want 2 quarantined, 2 loaded", s)
		}
		st.mu.Lock()
		q := st.quarantine
		st.mu.Unlock()
		if len(q) != 2 || !errors.Is(q[2], ErrBadRecord) || !errors.Is(q[3], ErrBadRecord) {
			t.Fatalf("quarantined %v; want records 2 and 3, with their reasons", q)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := f.Stats(); s.Succeeded != 2 {
			t.Fatalf("%+v; want the 2 good calls delivered", s)
		}
	})

}

// A first attempt failing because the transport is stopping is no answer
// of the provider: the throttle does not count it as an accept (a
// Permanent mark under the Stopping mark used to make it one).
func TestStoppingIsNotAnAccept(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	closing := rebound.Permanent(errors.New("grpc: the client connection is closing"))
	f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", func(context.Context, call) (any, error) { return nil, Stopping(closing) })),
		withThrottle(th))
	defer mustClose(t, f)
	for range 20 {
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); !isStopping(err) {
			t.Fatalf("Invoke = %v; want the Stopping error", err)
		}
	}
	// No accept counted: the throttle now rejects with probability 20/21
	// and more (with an accept per request, it would reject nothing).
	request := throttleRequests(t, th)
	rejected := 0
	for range 10 {
		if !request(time.Now(), false) {
			rejected++
		}
	}
	if rejected == 0 {
		t.Errorf("throttle admitted 10 of 10 requests after 20 requests the transport refused; want rejections (no accepts counted)")
	}
}
