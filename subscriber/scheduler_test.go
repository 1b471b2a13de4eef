package subscriber

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a timerOwner and jobRunner that is not a subscription: it
// records the kinds that fired and the jobs that ran, in order.
type recorder struct {
	mu    sync.Mutex
	sc    *scheduler
	fired []timerKind
	jobs  []int
}

func (r *recorder) onTimer(e *entry, gen uint32, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.gen != gen {
		return
	}
	r.fired = append(r.fired, e.kind)
	if e.kind == 2 {
		r.sc.enqueue(job{r: r, ctx: context.Background(), n: 7})
	}
}

func (r *recorder) runJob(_ context.Context, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, n)
}

func (r *recorder) flushJob() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, -1)
}

// The scheduler runs the entries and jobs of any owner: in due-time order,
// a cancelled entry never, a moved one at its new time, and a job enqueued
// from a firing right after it.
func TestSchedulerRunsAnyOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		done := make(chan struct{})
		sc := newScheduler(&wg, done)
		sc.start()
		r := &recorder{sc: sc}
		es := []entry{newEntry(r, 0), newEntry(r, 1), newEntry(r, 2), newEntry(r, 3)}
		now := time.Now()
		r.mu.Lock()
		sc.set(&es[0], now.Add(3*time.Second))
		sc.set(&es[1], now.Add(time.Second))
		sc.set(&es[2], now.Add(2*time.Second))
		sc.set(&es[3], now.Add(time.Second))
		sc.cancel(&es[3])
		sc.set(&es[1], now.Add(4*time.Second)) // moved
		r.mu.Unlock()

		time.Sleep(5 * time.Second)
		synctest.Wait()
		r.mu.Lock()
		fired, jobs := slices.Clone(r.fired), slices.Clone(r.jobs)
		r.mu.Unlock()
		if want := []timerKind{2, 0, 1}; !slices.Equal(fired, want) {
			t.Errorf("fired %v, want %v", fired, want)
		}
		if want := []int{7}; !slices.Equal(jobs, want) {
			t.Errorf("jobs %v, want %v", jobs, want)
		}
		if n := sc.len(); n != 0 {
			t.Errorf("%d entries left", n)
		}
		close(done)
		wg.Wait()
	})
}
