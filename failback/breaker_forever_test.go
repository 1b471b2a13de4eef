package failback

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/cluster"
)

// TestBreakerWaitsForAnOpenTimeoutThatNeverEnds: with
// an open timeout of math.MaxInt64 an open breaker stays open until
// the process restarts, so a retry that no breaker admits waits that long
// (it is held once), instead of being requeued every millisecond (the end
// of the open timeout overflowed into 1707, a wait of minBreakerWait).
func TestBreakerWaitsForAnOpenTimeoutThatNeverEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps, inner := bkProviders(1)
		ps[0].down.Store(true)
		dir, err := cluster.NewBreakerDirectory(inner, tripAfter(1, math.MaxInt64, DefaultRetryable),
			cluster.WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var retried []Task
		f := mustNew(t, dir, WithPolicy(bkPolicy, bkLimit), withObserver(testHooks{
			Retried: func(tk Task) { mu.Lock(); retried = append(retried, tk); mu.Unlock() },
		}))
		defer mustClose(t, f)
		if _, err := f.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if st := f.Stats(); st.BreakerWaits != 1 || st.Queued != 1 {
			t.Fatalf("5 s in: %d breaker waits, %d queued; want the call held once for the breaker", st.BreakerWaits, st.Queued)
		}
		mu.Lock()
		defer mu.Unlock()
		var boe *cluster.BreakerOpenError
		if len(retried) != 1 || !errors.As(retried[0].Err, &boe) || retried[0].Delay < 100*365*24*time.Hour {
			t.Fatalf("Retried hooks %+v, want one wait of more than a century for the breaker", retried)
		}
	})
}
