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
		d.Breakers() // delivers what is queued
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
		d.Breakers()
	})
}
