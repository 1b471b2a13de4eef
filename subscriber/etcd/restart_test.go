package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// This file measures many subscriptions resubscribing after a full
// cluster restart, with the Manager (jittered backoff and a shared
// limiter, the defaults) and with a fixed-interval baseline (one loop per
// subscription retrying every second, as hand-written reconnect loops
// do), over the same adapter and cluster. BenchmarkResubscribeAfterRestart
// prints the figures; TestRestartPacesResubscriptions checks the
// properties that do not depend on the machine's speed.

const bucket = 100 * time.Millisecond

// requestLog records when the members receive requests.
type requestLog struct {
	on    atomic.Bool
	mu    sync.Mutex
	times map[string][]time.Time // by request name
}

func (l *requestLog) hook(r etcdtest.Request) {
	if !l.on.Load() {
		return
	}
	now := time.Now()
	l.mu.Lock()
	l.times[r.Name] = append(l.times[r.Name], now)
	l.mu.Unlock()
}

func (l *requestLog) start() {
	l.mu.Lock()
	l.times = map[string][]time.Time{}
	l.mu.Unlock()
	l.on.Store(true)
}

func (l *requestLog) stop() map[string][]time.Time {
	l.on.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.times
}

// peak returns the largest number of times falling in one bucket of
// width d, buckets starting at from.
func peak(from time.Time, d time.Duration, times ...[]time.Time) int {
	counts := map[int64]int{}
	best := 0
	for _, ts := range times {
		for _, t := range ts {
			i := int64(t.Sub(from) / d)
			counts[i]++
			best = max(best, counts[i])
		}
	}
	return best
}

// tracked wraps the adapter to record, per key, the successful
// subscriptions made after mark.
type tracked struct {
	*etcdreg.Registry
	mu       sync.Mutex
	attempts int                  // Subscribe calls since mark
	ok       map[string]time.Time // key -> last success since mark (or ever, before mark)
}

func (tr *tracked) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	err := tr.Registry.Subscribe(ctx, k, s)
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.attempts++
	if err == nil {
		tr.ok[k.Service] = now
	}
	return err
}

func (tr *tracked) mark() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.attempts, tr.ok = 0, map[string]time.Time{}
}

// done returns the number of keys subscribed (since mark), the time of
// the last success and the attempts made.
func (tr *tracked) done() (n int, last time.Time, attempts int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, t := range tr.ok {
		if t.After(last) {
			last = t
		}
	}
	return len(tr.ok), last, tr.attempts
}

// restartResult is what one restart scenario measured.
type restartResult struct {
	peakReq  int           // requests of any kind in the busiest 100 ms
	peakGet  int           // Range requests in the busiest 100 ms
	gets     int           // Range requests from the restart to convergence
	attempts int           // Subscribe calls from the restart to convergence
	converge time.Duration // from the cluster serving again to the last resubscription
	down     time.Duration // from the stop to the cluster serving again
}

func (r restartResult) String() string {
	return fmt.Sprintf("peak %d requests/100ms (%d Gets/100ms), %d Gets, %d attempts, converged %.2fs after the cluster was back (down %.2fs)",
		r.peakReq, r.peakGet, r.gets, r.attempts, r.converge.Seconds(), r.down.Seconds())
}

// restartScenario subscribes to n services (one instance each) through
// mode ("manager", with the Manager's defaults, "manager-100/s", with a
// limiter of 100/s and bursts of 10, or "fixed-interval"), restarts the
// whole cluster and measures the resubscriptions.
func restartScenario(tb testing.TB, c *etcdtest.Cluster, log *requestLog, mode string, n int) restartResult {
	tb.Helper()
	cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cli.Close()
	reg, err := etcdreg.New(cli)
	if err != nil {
		tb.Fatal(err)
	}
	defer reg.Close()
	tr := &tracked{Registry: reg, ok: map[string]time.Time{}}

	keys := make([]subscriber.Key, n)
	for i := range keys {
		keys[i] = subscriber.Key{Service: fmt.Sprintf("svc-%04d", i)}
	}
	switch mode {
	case "manager", "manager-100/s":
		var opts []subscriber.Option // the defaults: jittered backoff, shared limiter
		if mode == "manager-100/s" {
			opts = append(opts, subscriber.WithPolicy(rebound.Policy{}, rebound.WithLimiter(rate.NewLimiter(100, 10))))
		}
		m, err := subscriber.New(tr, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		defer m.Close()
		for _, k := range keys {
			if _, err := m.Subscribe(context.Background(), k, func([]subscriber.Instance) {}); err != nil {
				tb.Fatal(err)
			}
		}
	case "fixed-interval":
		stop := startFixedInterval(tb, tr, keys, time.Second)
		defer stop()
	default:
		tb.Fatalf("unknown mode %q", mode)
	}
	subscribertest.Eventually(tb, 2*time.Minute, "every subscription", func() bool {
		got, _, _ := tr.done()
		return got == n
	})

	tr.mark()
	log.start()
	stopped := time.Now()
	c.Stop()
	if err := c.Start(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	back := time.Now()
	subscribertest.Eventually(tb, 2*time.Minute, "every subscription to resubscribe", func() bool {
		got, _, _ := tr.done()
		return got == n
	})
	reqs := log.stop()
	_, last, attempts := tr.done()
	var all [][]time.Time
	for _, ts := range reqs {
		all = append(all, ts)
	}
	return restartResult{
		peakReq:  peak(stopped, bucket, all...),
		peakGet:  peak(stopped, bucket, reqs[etcdtest.RequestRange]),
		gets:     len(reqs[etcdtest.RequestRange]),
		attempts: attempts,
		converge: last.Sub(back),
		down:     back.Sub(stopped),
	}
}

// startFixedInterval runs the baseline: one goroutine per key that
// subscribes, and whenever the subscription is disrupted (the adapter's
// Resubscribe, or a connection change) tries again every interval,
// without jitter or limit, until it succeeds. It returns a function that
// stops the goroutines and waits for them.
func startFixedInterval(tb testing.TB, reg *tracked, keys []subscriber.Key, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wakes := make([]chan struct{}, len(keys))
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	wakeAll := func() {
		for _, w := range wakes {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
	wg.Go(func() {
		_ = reg.MonitorConnection(ctx, func(bool) { wakeAll() })
	})
	for i, k := range keys {
		sink := &wakeSink{wake: wakes[i]}
		wg.Go(func() {
			defer func() {
				uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer ucancel()
				_ = reg.Unsubscribe(uctx, k, sink)
			}()
			timer := time.NewTimer(0)
			defer timer.Stop()
			<-timer.C
			for {
				// A disruption that arrived before this subscription
				// succeeds is covered by it.
				drain := func() {
					select {
					case <-sink.wake:
					default:
					}
				}
				for drain(); reg.Subscribe(ctx, k, sink) != nil; drain() {
					timer.Reset(interval)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-sink.wake:
				}
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

type wakeSink struct{ wake chan struct{} }

func (s *wakeSink) Update([]subscriber.Instance) {}
func (s *wakeSink) Confirmed(string)             {}
func (s *wakeSink) Resubscribe(error) {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// putServices registers one instance for each of n services.
func putServices(tb testing.TB, cli *clientv3.Client, n int) {
	tb.Helper()
	for start := 0; start < n; start += 100 {
		var ops []clientv3.Op
		for i := start; i < min(n, start+100); i++ {
			k := subscriber.Key{Service: fmt.Sprintf("svc-%04d", i)}
			key, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, k, "i")
			if err != nil {
				tb.Fatal(err)
			}
			v, err := etcdreg.EncodeInstance(subscriber.Instance{IP: "10.0.0.1", Port: uint64(10000 + i), Weight: 1, Healthy: true, Enabled: true})
			if err != nil {
				tb.Fatal(err)
			}
			ops = append(ops, clientv3.OpPut(key, string(v)))
		}
		write(tb, "put services", func(ctx context.Context) error {
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return err
		})
	}
}

// TestRestartPacesResubscriptions restarts a three-member cluster under
// 200 subscriptions: all of them resubscribe, and the Manager's shared
// limiter (here 100/s, burst 10) bounds the Gets the cluster sees in any
// 100 ms: at most 20 confirmations, each one Get plus at most one retry
// by the client (MaxUnaryRetries 1), with room for requests granted at
// the edge of a bucket and arriving in the next. Attempts made while the
// cluster is down fail in the client (ErrNotConnected) and reach no
// member.
func TestRestartPacesResubscriptions(t *testing.T) {
	const n = 200
	log := &requestLog{}
	c := newCluster(t, 3, etcdtest.WithRequestHook(log.hook))
	putServices(t, newClient(t, c), n)
	r := restartScenario(t, c, log, "manager-100/s", n)
	t.Logf("manager-100/s, %d subscriptions: %v", n, r)
	if r.peakGet > 60 {
		t.Errorf("%d Gets in 100 ms: the resubscriptions are not paced by the limiter", r.peakGet)
	}
}

// BenchmarkResubscribeAfterRestart prints, for 1,000 subscriptions and a
// full restart of a three-member cluster, the busiest 100 ms the cluster
// saw and the time every subscription took to resubscribe: with the
// Manager (its default limiter, and a limiter of 100/s with bursts of 10)
// and with the fixed-interval baseline, in the same run. One iteration is
// one restart (up to about 25 s); run it with -benchtime=1x.
func BenchmarkResubscribeAfterRestart(b *testing.B) {
	const n = 1000
	log := &requestLog{}
	c := newCluster(b, 3, etcdtest.WithRequestHook(log.hook))
	putServices(b, newClient(b, c), n)
	for _, mode := range []string{"manager", "manager-100/s", "fixed-interval"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			var sum restartResult
			for range b.N {
				r := restartScenario(b, c, log, mode, n)
				name := mode
				if mode == "manager" {
					name = "manager (default limiter 1000/s, burst 100)"
				}
				b.Logf("%s, %d subscriptions: %v", name, n, r)
				sum.peakReq = max(sum.peakReq, r.peakReq)
				sum.peakGet = max(sum.peakGet, r.peakGet)
				sum.gets += r.gets
				sum.attempts += r.attempts
				sum.converge += r.converge
			}
			b.ReportMetric(float64(sum.peakReq), "peak-req/100ms")
			b.ReportMetric(float64(sum.peakGet), "peak-get/100ms")
			b.ReportMetric(float64(sum.gets)/float64(b.N), "gets/restart")
			b.ReportMetric(float64(sum.attempts)/float64(b.N), "attempts/restart")
			b.ReportMetric(sum.converge.Seconds()/float64(b.N), "converge-s")
		})
	}
}
