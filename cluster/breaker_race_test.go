package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBreakerConcurrentFlipsOrderedEvents: goroutines succeeding and
// failing while the breaker flips through its states; the OnStateChange
// callbacks (which call back into the directory) come one at a time, each
// from the state the previous one went to, along gobreaker's edges, and
// the last one names the state the breaker is in.
func TestBreakerConcurrentFlipsOrderedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			events  []gobreaker.State
			bad     []string
			inCall  atomic.Int32
			d       *BreakerDirectory
			seq     atomic.Uint64
			allowed = map[[2]gobreaker.State]bool{
				{gobreaker.StateClosed, gobreaker.StateOpen}:     true,
				{gobreaker.StateOpen, gobreaker.StateHalfOpen}:   true,
				{gobreaker.StateHalfOpen, gobreaker.StateOpen}:   true,
				{gobreaker.StateHalfOpen, gobreaker.StateClosed}: true,
			}
		)
		last := gobreaker.StateClosed
		onChange := func(_ string, from, to gobreaker.State) {
			if inCall.Add(1) != 1 {
				mu.Lock()
				bad = append(bad, "two OnStateChange at once")
				mu.Unlock()
			}
			_, _ = d.List(context.Background(), &Invocation{}) // calls back into the directory
			mu.Lock()
			if from != last || !allowed[[2]gobreaker.State{from, to}] {
				bad = append(bad, from.String()+"->"+to.String()+" after "+last.String())
			}
			last = to
			events = append(events, to)
			mu.Unlock()
			inCall.Add(-1)
		}
		inner := &mutableDir{}
		inner.set(valueInvoker{target: "a", call: func() (any, error) {
			if seq.Add(1)%7 < 3 {
				return nil, errDown
			}
			return nil, nil
		}}, valueInvoker{target: "b", call: func() (any, error) { return nil, nil }})
		var err error
		d, err = NewBreakerDirectory(inner, WithMaxEjected(1), WithOpenTimeout(time.Millisecond),
			WithMaxOpenTimeout(4*time.Millisecond),
			WithBreakerSettings(func(string) gobreaker.Settings {
				return gobreaker.Settings{MaxRequests: 3, Interval: 2 * time.Millisecond, BucketPeriod: time.Millisecond / 2,
					ReadyToTrip: func(c gobreaker.Counts) bool { return c.TotalFailures >= 3 }, OnStateChange: onChange}
			}))
		if err != nil {
			t.Fatal(err)
		}
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil {
			t.Fatal(err)
		}
		a := ivs[0]
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 400 {
					_, err := a.Invoke(context.Background(), &Invocation{})
					var boe *BreakerOpenError
					if err != nil && !errors.Is(err, errDown) && !errors.As(err, &boe) {
						t.Errorf("call: %v", err)
					}
					if (i+g)%16 == 0 {
						time.Sleep(time.Duration(g+1) * 100 * time.Microsecond)
					}
				}
			})
		}
		wg.Wait()
		d.breakers() // delivers what is queued
		mu.Lock()
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("OnStateChange out of order: %v (of %d)", bad[:min(len(bad), 5)], len(events))
		}
		t.Logf("%d changes", len(events))
		if len(events) < 3 {
			t.Fatalf("only %d state changes: the test does not flip the breaker", len(events))
		}
		if st := d.members["a"].b.core.State(); st != last && !(last == gobreaker.StateOpen && st == gobreaker.StateHalfOpen) {
			t.Fatalf("breaker is %v, last OnStateChange said %v", st, last)
		}
		d.breakers()
	})
}

// TestBreakerHalfOpenProbesBounded: however many goroutines call a
// half-open target at once, at most MaxRequests calls reach it.
func TestBreakerHalfOpenProbesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probes = 3
		var inside, most atomic.Int32
		release := make(chan struct{})
		var failing atomic.Bool
		failing.Store(true)
		inner := &mutableDir{}
		inner.set(valueInvoker{target: "a", call: func() (any, error) {
			if failing.Load() {
				return nil, errDown
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inside.Add(-1)
			return nil, nil
		}})
		d, err := NewBreakerDirectory(inner, WithMaxEjected(1), WithOpenTimeout(time.Second), WithConsecutiveFailures(1),
			WithBreakerSettings(func(string) gobreaker.Settings { return gobreaker.Settings{MaxRequests: probes} }))
		if err != nil {
			t.Fatal(err)
		}
		ivs, _ := d.List(context.Background(), &Invocation{})
		a := ivs[0]
		_, _ = a.Invoke(context.Background(), &Invocation{}) // trips
		failing.Store(false)
		time.Sleep(2 * time.Second) // half-open
		var wg sync.WaitGroup
		var refused atomic.Int32
		for range 16 {
			wg.Go(func() {
				if _, err := a.Invoke(context.Background(), &Invocation{}); err != nil {
					refused.Add(1)
				}
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if n := most.Load(); n != probes {
			t.Fatalf("%d calls reached the half-open target at once, want MaxRequests (%d)", n, probes)
		}
		if n := refused.Load(); n != 16-probes {
			t.Fatalf("%d calls refused, want %d", n, 16-probes)
		}
		if st := d.members["a"].b.core.State(); st != gobreaker.StateClosed {
			t.Fatalf("after %d good probes: %v, want closed", probes, st)
		}
	})
}
