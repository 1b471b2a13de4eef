package subscriber_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The benchmarks run in real time (testing/synctest bubbles need a
// *testing.T); run them with -benchtime=1x. They report:
//
//	attempts/10s    subscribe requests the loops make against a down registry in 10 s
//	cpu-%           CPU time (user+sys, getrusage) / wall time, in % of one core,
//	                whole window including the start of the 1,000 loops
//	steady-cpu-%    the same after the first tenth of the window
//	B/sub           heap and stack bytes per subscription
//	ms-to-confirm   time from registry recovery to all 1,000 subscriptions confirmed
//	peak-req/100ms  most subscribe requests the registry got in any 100 ms window after recovery

const benchSubs = 1000

type nopSink struct{}

func (nopSink) Update([]subscriber.Instance) {}
func (nopSink) Resubscribe(error)            {}
func (nopSink) Confirmed(string)             {}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDownRegistry: 1,000 and 10,000 subscriptions against a down
// registry, next to a no-sleep loop (capped), a fixed 1 s interval loop
// and bare jittered timers. rebound-monitor is the Manager with the
// registry's ConnectionMonitor, which reports the connection down: its
// retries wait for the Connected report (park.go); rebound is the Manager
// without a monitor, retrying on its own timers.
func BenchmarkDownRegistry(b *testing.B) {
	for _, n := range []int{benchSubs, 10 * benchSubs} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) { downRegistry(b, n) })
	}
}

func downRegistry(b *testing.B, subs int) {
	const window = 10 * time.Second
	run := func(b *testing.B, d time.Duration, start func(reg *subscribertest.Registry, stop <-chan struct{}) func()) {
		b.ReportAllocs()
		for range b.N {
			reg := subscribertest.New()
			reg.SetDown(true)
			var n atomic.Int64
			reg.OnSubscribe(func(subscriber.Key) { n.Add(1) })
			stop := make(chan struct{})
			wall, cpu := time.Now(), cpuTime()
			wait := start(reg, stop)
			warm := time.NewTimer(d / 10)
			<-warm.C
			wall1, cpu1 := time.Now(), cpuTime()
			t := time.NewTimer(d - d/10)
			<-t.C
			close(stop)
			end, cpu2 := time.Now(), cpuTime()
			wait()
			elapsed := end.Sub(wall)
			b.ReportMetric(float64(n.Load())*float64(window)/float64(elapsed), "attempts/10s")
			// Over the whole window (setup of the loops included), and
			// after its first tenth (steady state).
			b.ReportMetric(100*float64(cpu2-cpu)/float64(elapsed), "cpu-%")
			b.ReportMetric(100*float64(cpu2-cpu1)/float64(end.Sub(wall1)), "steady-cpu-%")
		}
	}
	for _, monitor := range []bool{false, true} {
		name := "rebound"
		if monitor {
			name = "rebound-monitor"
		}
		b.Run(name, func(b *testing.B) {
			run(b, window, func(reg *subscribertest.Registry, stop <-chan struct{}) func() {
				if monitor {
					return reboundDownMonitored(b, reg, subs)
				}
				return reboundDown(b, plain{reg}, subs)
			})
		})
	}
	b.Run("fixed-1s", func(b *testing.B) {
		run(b, window, func(reg *subscribertest.Registry, stop <-chan struct{}) func() {
			var wg sync.WaitGroup
			for i := range subs {
				key := subscriber.Key{Service: fmt.Sprint("svc", i)}
				wg.Go(func() {
					t := time.NewTimer(0)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
						}
						if reg.Subscribe(context.Background(), key, nopSink{}) == nil {
							return
						}
						t.Reset(time.Second)
					}
				})
			}
			return wg.Wait
		})
	})
	b.Run("timers-only", func(b *testing.B) {
		// The floor of any jittered loop: the same schedule as rebound's
		// default policy (one BackOff per loop) on a bare time.Timer, with
		// one registry call per wake-up and nothing else. Spread wake-ups
		// cost more CPU than the fixed interval's synchronized ones.
		run(b, window, func(reg *subscribertest.Registry, stop <-chan struct{}) func() {
			var wg sync.WaitGroup
			for i := range subs {
				key := subscriber.Key{Service: fmt.Sprint("svc", i)}
				wg.Go(func() {
					bo := rebound.Policy{}.NewBackOff()
					t := time.NewTimer(0)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
						}
						if reg.Subscribe(context.Background(), key, nopSink{}) == nil {
							return
						}
						t.Reset(bo.NextBackOff())
					}
				})
			}
			return wg.Wait
		})
	})
	b.Run("no-sleep", func(b *testing.B) {
		// Capped: at most 1 s and 5,000,000 attempts.
		const maxAttempts = 5_000_000
		run(b, time.Second, func(reg *subscribertest.Registry, stop <-chan struct{}) func() {
			var wg sync.WaitGroup
			var total atomic.Int64
			for i := range subs {
				key := subscriber.Key{Service: fmt.Sprint("svc", i)}
				wg.Go(func() {
					for total.Add(1) <= maxAttempts {
						select {
						case <-stop:
							return
						default:
						}
						if reg.Subscribe(context.Background(), key, nopSink{}) == nil {
							return
						}
					}
				})
			}
			return wg.Wait
		})
	})
}

// reboundDown starts a Manager of subs subscriptions over r and returns
// its Close.
func reboundDown(b *testing.B, r subscriber.Registry, subs int) func() {
	m, err := subscriber.New(r)
	if err != nil {
		b.Fatal(err)
	}
	return subscribeDown(b, m, subs)
}

// reboundDownMonitored is reboundDown over reg and its monitor, in an
// outage the Manager knows of: the registry was up (one subscription
// acknowledged), then went down, and the monitor reported it.
func reboundDownMonitored(b *testing.B, reg *subscribertest.Registry, subs int) func() {
	reg.SetDown(false)
	m, err := subscriber.New(reg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := m.Subscribe(context.Background(), subscriber.Key{Service: "up"}, func([]subscriber.Instance) {})
	if err != nil {
		b.Fatal(err)
	}
	<-s.Ready()
	reg.SetDown(true)
	for m.Counts().Connection != "disconnected" {
		runtime.Gosched()
	}
	return subscribeDown(b, m, subs)
}

func subscribeDown(b *testing.B, m *subscriber.Manager, subs int) func() {
	for i := range subs {
		if _, err := m.Subscribe(context.Background(), subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {}); err != nil {
			b.Fatal(err)
		}
	}
	return func() { m.Close() }
}

// memSubs is the number of subscriptions BenchmarkMemoryPerSubscription
// creates per iteration, whatever b.N: a figure per subscription measured
// over one subscription is GC noise (it came out negative at -benchtime 1x).
const memSubs = 10_000

// BenchmarkMemoryPerSubscription measures the memory held per
// subscription, pending (registry down, retrying) and subscribed (idle),
// over memSubs subscriptions per iteration; the metrics are means over
// iterations, meaningful at any -benchtime (1x included):
//
//	B/sub          heap and stack in use (HeapInuse+StackInuse) per subscription
//	heap-B/sub     live heap (HeapAlloc after a GC) per subscription: what an
//	               outside probe reads from runtime.MemStats
//	goroutines/sub goroutines left per subscription
//
// The plain cases use a registry without a ConnectionMonitor and no
// limiter; the -monitor cases New's defaults and the registry's monitor,
// as a user would (the Manager knows the registry is down).
func BenchmarkMemoryPerSubscription(b *testing.B) {
	for _, c := range []struct {
		name          string
		down, monitor bool
	}{{"pending", true, false}, {"subscribed", false, false}, {"pending-monitor", true, true}, {"subscribed-monitor", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var inuse, heap, gs float64
			for range b.N {
				r := memoryPerSubscription(b, c.down, c.monitor, memSubs)
				inuse += r.inuse
				heap += r.heap
				gs += r.goroutines
			}
			n := float64(b.N)
			b.ReportMetric(inuse/n, "B/sub")
			b.ReportMetric(heap/n, "heap-B/sub")
			b.ReportMetric(gs/n, "goroutines/sub")
		})
	}
}

type memFigures struct{ inuse, heap, goroutines float64 }

// memoryPerSubscription subscribes n keys and returns the memory held per
// subscription once they are all retrying (down) or subscribed and idle.
func memoryPerSubscription(b *testing.B, down, monitor bool, n int) memFigures {
	b.StopTimer()
	reg := subscribertest.New()
	reg.SetDown(down)
	var r subscriber.Registry = plain{reg}
	opts := []subscriber.Option{subscriber.WithLimiter(nil)}
	if monitor {
		r, opts = reg, nil
	}
	m, err := subscriber.New(r, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if monitor && down {
		for m.Counts().Connection != "disconnected" {
			runtime.Gosched()
		}
	}
	keys := make([]subscriber.Key, n)
	for i := range keys {
		keys[i] = subscriber.Key{Service: fmt.Sprint("svc", i)}
	}
	subs := make([]*subscriber.Subscription, n)
	l := func([]subscriber.Instance) {}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	b.StartTimer()
	for i := range n {
		subs[i], err = m.Subscribe(context.Background(), keys[i], l)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, s := range subs {
		if down {
			for s.Status().TotalAttempts == 0 {
				runtime.Gosched()
			}
		} else {
			<-s.Ready()
		}
	}
	// Let the attempt and delivery goroutines of the first attempts finish.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > g0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	runtime.KeepAlive(subs)
	runtime.KeepAlive(keys)
	return memFigures{
		inuse:      float64(int64(after.HeapInuse+after.StackInuse)-int64(before.HeapInuse+before.StackInuse)) / float64(n),
		heap:       float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		goroutines: float64(g1-g0) / float64(n),
	}
}

// BenchmarkManySubscriptions: 100,000 subscriptions in one process against
// a down registry (the default policy and limiter): the time to subscribe
// them all, memory per subscription, and the CPU they cost once retrying
// (a 5 s window after a 5 s warm-up).
func BenchmarkManySubscriptions(b *testing.B) {
	const n = 100_000
	for range b.N {
		reg := subscribertest.New()
		reg.SetDown(true)
		var attempts atomic.Int64
		reg.OnSubscribe(func(subscriber.Key) { attempts.Add(1) })
		m, err := subscriber.New(plain{reg})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		l := func([]subscriber.Instance) {}
		for i := range n {
			if _, err := m.Subscribe(context.Background(), subscriber.Key{Service: fmt.Sprint("svc", i)}, l); err != nil {
				b.Fatal(err)
			}
		}
		subscribeTime := time.Since(start)
		warm := time.NewTimer(5 * time.Second)
		<-warm.C
		runtime.GC()
		runtime.ReadMemStats(&after)
		wall, cpu, a0 := time.Now(), cpuTime(), attempts.Load()
		window := time.NewTimer(5 * time.Second)
		<-window.C
		elapsed, used, a1 := time.Since(wall), cpuTime()-cpu, attempts.Load()
		closeStart := time.Now()
		m.Close()
		b.ReportMetric(float64(subscribeTime.Nanoseconds())/n, "ns/subscribe")
		b.ReportMetric(float64(int64(after.HeapInuse+after.StackInuse)-int64(before.HeapInuse+before.StackInuse))/n, "B/sub")
		b.ReportMetric(100*float64(used)/float64(elapsed), "steady-cpu-%")
		b.ReportMetric(float64(a1-a0)/elapsed.Seconds(), "attempts/s")
		b.ReportMetric(float64(time.Since(closeStart).Milliseconds()), "ms-to-close")
	}
}

// BenchmarkRecovery: 1,000 subscriptions retrying through a 5 s outage; the
// registry comes back. rebound (default policy, monitor, shared limiter of
// 1,000/s burst 100) next to fixed 1 s retries with no jitter and no limiter.
func BenchmarkRecovery(b *testing.B) {
	cases := []struct {
		name    string
		monitor bool
		opts    []subscriber.Option
	}{
		{"rebound", true, nil},
		{"rebound-no-monitor", false, nil},
		{"fixed-1s", false, []subscriber.Option{
			subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}),
			subscriber.WithLimiter(nil),
		}},
		{"rebound-limit-100/s", true, []subscriber.Option{subscriber.WithLimiter(rate.NewLimiter(100, 10))}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				reg := subscribertest.New()
				reg.SetDown(true)
				var r subscriber.Registry = plain{reg}
				if c.monitor {
					r = reg
				}
				m, err := subscriber.New(r, c.opts...)
				if err != nil {
					b.Fatal(err)
				}
				subs := make([]*subscriber.Subscription, benchSubs)
				for i := range subs {
					subs[i], _ = m.Subscribe(context.Background(), subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
				}
				outage := time.NewTimer(5 * time.Second)
				<-outage.C
				var mu sync.Mutex
				var at []time.Duration
				up := time.Now()
				reg.OnSubscribe(func(subscriber.Key) {
					d := time.Since(up)
					mu.Lock()
					at = append(at, d)
					mu.Unlock()
				})
				reg.SetDown(false)
				for _, s := range subs {
					<-s.Ready()
				}
				recovery := time.Since(up)
				m.Close()
				mu.Lock()
				slices.Sort(at)
				peak := 0
				for i, j := 0, 0; i < len(at); i++ {
					for j < len(at) && at[j]-at[i] < 100*time.Millisecond {
						j++
					}
					peak = max(peak, j-i)
				}
				mu.Unlock()
				b.ReportMetric(float64(recovery.Milliseconds()), "ms-to-confirm")
				b.ReportMetric(float64(peak), "peak-req/100ms")
			}
		})
	}
}
