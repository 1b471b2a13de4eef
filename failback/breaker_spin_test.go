package failback

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/cluster"
)

// hangProvider fails while down, and blocks while hang is set.
type hangProvider struct {
	down  atomic.Bool
	hang  atomic.Pointer[chan struct{}] // nil: no hang
	calls atomic.Int64
}

func (p *hangProvider) Target() string { return "10.0.0.1:20880" }
func (p *hangProvider) Invoke(ctx context.Context, _ *cluster.Invocation) (any, error) {
	p.calls.Add(1)
	if h := p.hang.Load(); h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.down.Load() {
		return nil, errUnavailable
	}
	return nil, nil
}

// TestBreakerWaitDuringLongProbe: while the lone target's half-open probe
// takes long, a queued retry waits for the breaker at the directory's
// recheck pace (a sixteenth of the open timeout), not every millisecond
// (the Until it was given had passed: 5 s of probe made 5,000 waits).
func TestBreakerWaitDuringLongProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &hangProvider{}
		p.down.Store(true)
		dir, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory(p), tripAfter(1, time.Second, DefaultRetryable),
			cluster.WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		f := mustNew(t, dir, WithPolicy(bkPolicy, bkLimit))
		defer mustClose(t, f)
		if _, err := f.Invoke(context.Background(), &cluster.Invocation{Method: "A"}); err != nil {
			t.Fatalf("Invoke A: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		hang := make(chan struct{})
		p.hang.Store(&hang)
		time.Sleep(time.Second) // A's retry is the half-open probe: it hangs
		synctest.Wait()
		if _, err := f.Invoke(context.Background(), &cluster.Invocation{Method: "B"}); err != nil {
			t.Fatalf("Invoke B: %v", err) // queued: no breaker admits it
		}
		before := f.Stats().BreakerWaits
		time.Sleep(5 * time.Second)
		synctest.Wait()
		waits := f.Stats().BreakerWaits - before
		close(hang)
		p.down.Store(false)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if waits > 5*16+2 {
			t.Errorf("%d breaker waits during a 5 s probe, want at most %d (one per recheck, 1 s/16)", waits, 5*16+2)
		}
		if st := f.Stats(); st.Succeeded != 2 {
			t.Errorf("end: %+v, want both calls delivered", st)
		}
	})
}
