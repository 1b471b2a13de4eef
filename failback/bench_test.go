package failback

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// nopInvoker succeeds at once.
type nopInvoker struct{}

func (nopInvoker) Target() string { return "10.0.0.7:20880" }
func (nopInvoker) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, nil
}

// benchInvoker is a package variable so that the direct call is a real
// interface call (the compiler cannot devirtualize it).
var benchInvoker cluster.Invoker = nopInvoker{}

// BenchmarkInvoke compares the success path of a failback Invoke with a
// direct call of the same invoker: the difference is what failback costs
// when nothing fails (a closed-flag load, List on a static directory,
// Select by cluster.Random()).
func BenchmarkInvoke(b *testing.B) {
	iv := benchInvoker
	inv := &cluster.Invocation{Method: "Notify"}
	ctx := context.Background()
	f := mustNew(b, cluster.NewStaticDirectory(iv))
	defer mustClose(b, f)

	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := iv.Invoke(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failback", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.Invoke(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failback/budget", func(b *testing.B) {
		budget, _ := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
		fb := mustNew(b, cluster.NewStaticDirectory(iv), withBudget(budget))
		defer mustClose(b, fb)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fb.Invoke(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = iv.Invoke(ctx, inv)
			}
		})
	})
	b.Run("failback/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = f.Invoke(ctx, inv)
			}
		})
	})
}

// BenchmarkEnqueue measures queueing a failed call (classification, a new
// BackOff, the first delay, the heap push), with b.N tasks pending at the
// end.
func BenchmarkEnqueue(b *testing.B) {
	pol := rebound.Policy{Initial: time.Hour, Max: time.Hour, Jitter: rebound.EqualJitter}
	f := mustNew(b, cluster.NewStaticDirectory(nopInvoker{}), WithMaxTasks(1<<30), WithPolicy(pol))
	defer func() { _ = f.Close() }()
	inv := &cluster.Invocation{Method: "Notify"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := f.firstFailure(ctx, inv, nil, errRefused); err != nil {
			b.Fatal(err)
		}
	}
}

// The scheduler benchmark: 1,000,000 pending tasks, due between 30 min and
// 1 h from now, then
//
//   - B/task: live heap per pending task (task, its BackOff, queue slot);
//   - ns/enqueue: queueing one failed call;
//   - idle-cpu-ms/s: process CPU time per second while nothing is due;
//   - late-p50-ms, late-p99-ms: how late 10,000 further tasks, due over the
//     next second, are started, with the 1M tasks still pending.
//
// "heap" is the failback Invoker. "ticker-fifo" is the old approach (Java
// Dubbo's timer wheel and dubbo-go's ticker have 1 s granularity): a FIFO
// scanned by a 1 s ticker. It scans the whole FIFO on each tick (dubbo-go
// only looked at the head, which with per-task delays blocks every task
// behind a long one: its lateness here would be 30 min and more).
//
// Set REBOUND_BENCH_TASKS to change the number of pending tasks.
func BenchmarkScheduler(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("REBOUND_BENCH_TASKS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	b.Run("heap", func(b *testing.B) { benchScheduler(b, n, newHeapSched) })
	b.Run("ticker-fifo", func(b *testing.B) { benchScheduler(b, n, newTickerSched) })
}

// sched is what benchScheduler drives.
type sched interface {
	// enqueue queues one failed call due after d.
	enqueue(d time.Duration)
	// enqueueTimed queues a call due after d whose start is recorded.
	enqueueTimed(d time.Duration)
	// lateness returns how late each timed task started, once all have.
	lateness(count int) []time.Duration
	close()
}

const (
	lateTasks  = 10_000
	idleWindow = 2 * time.Second
)

func benchScheduler(b *testing.B, n int, mk func(b *testing.B, n int) sched) {
	b.ReportAllocs()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := mk(b, n)
		rng := rand.New(rand.NewPCG(1, 2))
		delays := make([]time.Duration, n)
		for i := range delays {
			delays[i] = 30*time.Minute + time.Duration(rng.Int64N(int64(30*time.Minute)))
		}
		start := time.Now()
		for _, d := range delays {
			s.enqueue(d)
		}
		enqueue := time.Since(start)
		delays = nil
		runtime.GC()
		runtime.ReadMemStats(&after)

		runtime.GC()
		cpu0 := cpuTime()
		time.Sleep(idleWindow)
		idle := cpuTime() - cpu0

		for range lateTasks {
			s.enqueueTimed(time.Duration(rng.Int64N(int64(time.Second))))
		}
		late := s.lateness(lateTasks)
		s.close()

		slices.Sort(late)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/task")
		b.ReportMetric(float64(enqueue.Nanoseconds())/float64(n), "ns/enqueue")
		b.ReportMetric(float64(idle.Microseconds())/1000/idleWindow.Seconds(), "idle-cpu-ms/s")
		b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "late-p50-ms")
		b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "late-p99-ms")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// latenessRecorder collects the start delays of timed tasks.
type latenessRecorder struct {
	mu   sync.Mutex
	late []time.Duration
	all  chan struct{}
	want int // set before the timed tasks are queued
}

func newLatenessRecorder(want int) *latenessRecorder {
	return &latenessRecorder{all: make(chan struct{}), want: want}
}

func (r *latenessRecorder) record(d time.Duration) {
	r.mu.Lock()
	r.late = append(r.late, d)
	full := len(r.late) == r.want
	r.mu.Unlock()
	if full {
		close(r.all)
	}
}

func (r *latenessRecorder) wait(count int) []time.Duration {
	<-r.all
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late[:count]
}

// heapSched drives the failback Invoker.
type heapSched struct {
	b   *testing.B
	f   *Invoker
	pol rebound.Policy
	inv *cluster.Invocation
	rec *latenessRecorder
}

// timedInvoker records how late a timed task starts: its Args[0] is the
// due time in the invoker's clock.
type timedInvoker struct {
	f   **Invoker
	rec *latenessRecorder
}

func (timedInvoker) Target() string { return "10.0.0.7:20880" }
func (t timedInvoker) Invoke(_ context.Context, inv *cluster.Invocation) (any, error) {
	if len(inv.Args) == 1 {
		t.rec.record(time.Duration((*t.f).now() - inv.Args[0].(int64)))
	}
	return nil, nil
}

func newHeapSched(b *testing.B, n int) sched {
	s := &heapSched{b: b, inv: &cluster.Invocation{Method: "Notify"},
		pol: rebound.Policy{Initial: time.Second, Max: time.Second},
		rec: newLatenessRecorder(lateTasks)}
	s.f = mustNew(b, cluster.NewStaticDirectory(timedInvoker{f: &s.f, rec: s.rec}),
		WithMaxTasks(n+lateTasks), WithPolicy(s.pol))
	return s
}

func (s *heapSched) task(inv *cluster.Invocation) *task {
	now := s.f.now()
	return &task{inv: inv, attempts: 1, lastErr: errRefused, sched: s.f.retrier.NewSchedule(s.f.at(now)), born: now, expires: math.MaxInt64}
}

func (s *heapSched) enqueue(d time.Duration) {
	if err := s.f.offer(s.task(s.inv), d, s.f.nextSeq.Add(1)-1); err != nil {
		s.b.Fatal(err)
	}
}

func (s *heapSched) enqueueTimed(d time.Duration) {
	t := s.task(&cluster.Invocation{Method: "Timed"})
	t.inv.Args = []any{t.born + int64(d)}
	if err := s.f.offer(t, d, s.f.nextSeq.Add(1)-1); err != nil {
		s.b.Fatal(err)
	}
}

func (s *heapSched) lateness(count int) []time.Duration {
	return s.rec.wait(count)
}

func (s *heapSched) close() { _ = s.f.Close() }

// tickerSched is the baseline: a FIFO scanned by a 1 s ticker.
type tickerSched struct {
	pol     rebound.Policy
	retrier *rebound.Retrier
	inv     *cluster.Invocation
	rec     *latenessRecorder
	epoch   time.Time

	mu sync.Mutex
	q  []*task

	stop chan struct{}
	done chan struct{}
}

func newTickerSched(*testing.B, int) sched {
	s := &tickerSched{pol: rebound.Policy{Initial: time.Second, Max: time.Second},
		inv: &cluster.Invocation{Method: "Notify"}, rec: newLatenessRecorder(lateTasks),
		epoch: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	s.retrier, _ = rebound.NewRetrier(s.pol)
	go s.run()
	return s
}

func (s *tickerSched) now() int64 { return int64(time.Since(s.epoch)) }

func (s *tickerSched) enqueueAt(inv *cluster.Invocation, d time.Duration) *task {
	t := &task{inv: inv, attempts: 1, lastErr: errRefused, sched: s.retrier.NewSchedule(time.Now()), born: s.now(), expires: math.MaxInt64}
	t.due = t.born + int64(d)
	s.mu.Lock()
	s.q = append(s.q, t)
	s.mu.Unlock()
	return t
}

func (s *tickerSched) enqueue(d time.Duration) { s.enqueueAt(s.inv, d) }

func (s *tickerSched) enqueueTimed(d time.Duration) {
	inv := &cluster.Invocation{Method: "Timed"}
	t := s.enqueueAt(inv, d)
	inv.Args = []any{t.due}
}

func (s *tickerSched) run() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.scan()
		case <-s.stop:
			return
		}
	}
}

// scan fires every due task and keeps the others, in order.
func (s *tickerSched) scan() {
	now := s.now()
	var due []*task
	s.mu.Lock()
	keep := s.q[:0]
	for _, t := range s.q {
		if t.due <= now {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	clear(s.q[len(keep):])
	s.q = keep
	s.mu.Unlock()
	for _, t := range due {
		if len(t.inv.Args) == 1 {
			s.rec.record(time.Duration(s.now() - t.inv.Args[0].(int64)))
		}
	}
}

func (s *tickerSched) lateness(count int) []time.Duration {
	return s.rec.wait(count)
}

func (s *tickerSched) close() {
	close(s.stop)
	<-s.done
}
