package rebound_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
)

func TestEventKindStrings(t *testing.T) {
	seen := map[string]bool{}
	for k := rebound.EventRetry; k <= rebound.EventConnection; k++ {
		s := k.String()
		if s == "" || seen[s] || s[:min(len(s), 9)] == "EventKind" {
			t.Fatalf("EventKind(%d).String() = %q: empty, repeated or unnamed", k, s)
		}
		seen[s] = true
	}
	if s := rebound.EventKind(200).String(); s != "EventKind(200)" {
		t.Fatalf("unknown kind = %q", s)
	}
}

func TestWithObserverIgnoresNil(t *testing.T) {
	var nilFunc rebound.ObserverFunc
	var nilQueue *rebound.Queue
	for _, o := range []rebound.Observer{nil, nilFunc, nilQueue} {
		if rebound.WithObserver(o) != nil {
			t.Fatalf("WithObserver(%#v) is not nil", o)
		}
	}
	if rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {})) == nil {
		t.Fatal("WithObserver(a func) is nil")
	}
}

func TestNewQueueBadArguments(t *testing.T) {
	ok := rebound.ObserverFunc(func(rebound.Event) {})
	for _, tc := range []struct {
		o    rebound.Observer
		n    int
		want string
	}{{nil, 1, "rebound.NewQueue: o must not be nil"}, {ok, -1, "rebound.NewQueue: capacity must not be negative"}} {
		q, err := rebound.NewQueue(tc.o, tc.n, nil)
		var ae *rebound.ArgumentError
		if q != nil || !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || err.Error() != tc.want {
			t.Fatalf("NewQueue = %v, %v; want %q", q, err, tc.want)
		}
	}
}

// A slow observer behind a Queue blocks no emitter: Observe returns at
// once, the events arrive in order, the overflow is counted and warned
// about once, and Shutdown delivers what was queued.
func TestQueueOrdersDropsAndDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.WarnLevel)
		release := make(chan struct{})
		var mu sync.Mutex
		var got []int
		slow := rebound.ObserverFunc(func(e rebound.Event) {
			<-release
			mu.Lock()
			got = append(got, e.Attempt)
			mu.Unlock()
		})
		q, err := rebound.NewQueue(slow, 3, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		q.Observe(rebound.Event{Attempt: 1})
		synctest.Wait() // the goroutine holds event 1, blocked in the observer
		for i := 2; i <= 6; i++ {
			q.Observe(rebound.Event{Attempt: i}) // 2, 3, 4 fit; 5, 6 are dropped
		}
		if q.Dropped() != 2 || q.Len() != 3 {
			t.Fatalf("Dropped %d, Len %d; want 2, 3", q.Dropped(), q.Len())
		}
		if n := logs.FilterMessageSnippet("queue full").Len(); n != 1 {
			t.Fatalf("%d warnings, want 1 per episode", n)
		}
		close(release)
		if err := q.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
			t.Fatalf("delivered %v, want [1 2 3 4]", got)
		}
		q.Observe(rebound.Event{Attempt: 7}) // after the stop: ignored
		if q.Len() != 0 || q.Close() != nil {
			t.Fatal("a stopped Queue took an event, or Close failed")
		}
	})
}

// Close drops what is queued; Shutdown bounded by ctx gives up waiting; a
// panicking observer is recovered and the next event still arrives; Close
// from inside the observer returns ErrCalledFromCallback.
func TestQueueCloseShutdownPanicAndSelfClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.ErrorLevel)
		var q *rebound.Queue
		var selfClose error
		var seen []int
		block := make(chan struct{})
		q, _ = rebound.NewQueue(rebound.ObserverFunc(func(e rebound.Event) {
			seen = append(seen, e.Attempt)
			switch e.Attempt {
			case 1:
				panic("observer bug")
			case 2:
				<-block
			case 3:
				selfClose = q.Close()
			}
		}), 0, zap.New(core))
		q.Observe(rebound.Event{Attempt: 1})
		q.Observe(rebound.Event{Attempt: 2})
		q.Observe(rebound.Event{Attempt: 3})
		synctest.Wait()
		if logs.FilterMessageSnippet("observer panicked").Len() != 1 {
			t.Fatal("the panic was not logged")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		go func() { time.Sleep(2 * time.Second); close(block) }()
		if err := q.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
		}
		// Shutdown returned after event 2 returned; event 3 was dropped.
		if len(seen) != 2 || selfClose != nil {
			t.Fatalf("seen %v, self close %v", seen, selfClose)
		}

		q2, _ := rebound.NewQueue(nil, 0, nil)
		if q2 != nil {
			t.Fatal("NewQueue(nil) returned a Queue")
		}
		var q3 *rebound.Queue
		q3, _ = rebound.NewQueue(rebound.ObserverFunc(func(rebound.Event) { selfClose = q3.Close() }), 1, nil)
		q3.Observe(rebound.Event{})
		synctest.Wait()
		if !errors.Is(selfClose, rebound.ErrCalledFromCallback) {
			t.Fatalf("Close from the observer = %v, want ErrCalledFromCallback", selfClose)
		}
		if err := q3.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// ptrObserver is an Observer implemented on a pointer, as EventLog and
// Queue are.
type ptrObserver struct{ n int }

func (p *ptrObserver) Observe(rebound.Event) { p.n++ }

// A typed nil (a nil *Queue, a nil pointer of the caller's own Observer
// type) is a nil observer too: WithObserver ignores it, instead of a
// nil-pointer panic on the caller's goroutine at the first event.
func TestWithObserverIgnoresTypedNil(t *testing.T) {
	var q *rebound.Queue
	var p *ptrObserver
	for _, o := range []rebound.Observer{q, p} {
		if rebound.WithObserver(o) != nil {
			t.Errorf("WithObserver(%T(nil)) is not nil", o)
		}
		r, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("Do with WithObserver(%T(nil)) panicked: %v", o, v)
				}
			}()
			if err := r.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
				t.Errorf("Do: %v", err)
			}
		}()
	}
	if rebound.WithObserver(&ptrObserver{}) == nil {
		t.Error("WithObserver(a non-nil pointer) is nil")
	}
}

// Many goroutines observe through one small Queue while it is shut down:
// each goroutine's events arrive in order, the delivered and the dropped
// ones never exceed what was observed, nothing is delivered after
// Shutdown returns, and its goroutine ends (goleak in TestMain).
func TestQueueConcurrentObserveAndShutdown(t *testing.T) {
	const producers, each = 8, 2000
	var mu sync.Mutex
	last := make([]int, producers)
	delivered := 0
	var after bool
	var bad []string
	q, err := rebound.NewQueue(rebound.ObserverFunc(func(e rebound.Event) {
		mu.Lock()
		defer mu.Unlock()
		p := e.Detail.(int)
		if after {
			bad = append(bad, "delivered after Shutdown returned")
		}
		if e.Attempt <= last[p] {
			bad = append(bad, "out of order")
		}
		last[p] = e.Attempt
		delivered++
	}), 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := 1; i <= each; i++ {
				q.Observe(rebound.Event{Kind: rebound.EventAttempt, Attempt: i, Detail: p})
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = q.Len()
			_ = q.Dropped()
		}
	})
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after = true
	mu.Unlock()
	wg.Wait()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d wrong deliveries, first: %s", len(bad), bad[0])
	}
	if n := delivered + int(q.Dropped()); n > producers*each {
		t.Fatalf("%d delivered + %d dropped > %d observed", delivered, q.Dropped(), producers*each)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after Shutdown", q.Len())
	}
}

// Under a sustained overload (the observer frees a slot, the next event
// takes it, the one after is dropped, again and again) the overrun is one
// episode until the observer catches up: one warning, not one per slot
// freed (which logged at the slow observer's own rate).
func TestQueueOneWarningPerSustainedOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.WarnLevel)
		release := make(chan struct{})
		q, err := rebound.NewQueue(rebound.ObserverFunc(func(rebound.Event) { <-release }), 1, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		q.Observe(rebound.Event{Attempt: 1})
		synctest.Wait() // the goroutine holds event 1
		for i := range 50 {
			q.Observe(rebound.Event{Attempt: 2 + 2*i}) // takes the free slot
			q.Observe(rebound.Event{Attempt: 3 + 2*i}) // dropped
			release <- struct{}{}
			synctest.Wait() // the goroutine holds the next event; the slot is free
		}
		if d := q.Dropped(); d != 50 {
			t.Fatalf("Dropped = %d, want 50", d)
		}
		if n := logs.FilterMessageSnippet("queue full").Len(); n != 1 {
			t.Errorf("%d warnings during one sustained overload, want 1", n)
		}
		release <- struct{}{}
		synctest.Wait() // caught up (the queue empty): the episode is over
		q.Observe(rebound.Event{Attempt: 200})
		synctest.Wait() // the goroutine holds it
		q.Observe(rebound.Event{Attempt: 201})
		q.Observe(rebound.Event{Attempt: 202}) // dropped: a new episode
		if n := logs.FilterMessageSnippet("queue full").Len(); n != 2 {
			t.Errorf("%d warnings after a second overload, want 2", n)
		}
		close(release)
		if err := q.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
