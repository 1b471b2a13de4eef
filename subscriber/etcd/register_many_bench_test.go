package etcd_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// manyRegistrations are the sizes of BenchmarkManyRegistrations: a
// registry sidecar or gateway registering many instances from one client.
var manyRegistrations = []int{1000, 10000}

// memInUse returns the heap and the goroutine stacks in use, after two
// collections.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkManyRegistrations registers n instances from one client
// against a real etcd member, through clientv3 alone (baseline: Grant,
// Put with the lease, KeepAlive, the same keys and TTL; its channels are
// not read, which costs it nothing) and through Register, in one run. It
// reports per registration the heap, the goroutine stacks, both together
// and the goroutines, then the process's CPU while the member is stopped
// (reportDownCPU; the clients' own reconnect attempts included). Run with
// -benchtime=1x; -count interleaves the modes' rounds.
func BenchmarkManyRegistrations(b *testing.B) {
	for _, n := range manyRegistrations {
		for _, mode := range []string{"clientv3", "rebound"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					manyRegistrations1(b, n, mode)
				}
			})
		}
	}
}

func manyRegistrations1(b *testing.B, n int, mode string) {
	c := newCluster(b, 1)
	cli := newClient(b, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := subscriber.Key{Service: "orders"}
	heap0, stack0 := memInUse()
	g0 := runtime.NumGoroutine()
	regs := make([]subscriber.Registration, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const workers = 64 // etcd batches concurrent writes into one fsync
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				in := inst(fmt.Sprintf("10.4.%d.%d", i/250, i%250+1), 8080)
				if mode == "rebound" {
					g, err := etcdreg.Register(ctx, cli, key, in)
					regs[i] = g
					errs <- err
					continue
				}
				errs <- bareRegister(ctx, cli, key, in)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	heap1, stack1 := memInUse()
	g1 := runtime.NumGoroutine()
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	b.ReportMetric(per(heap0, heap1), "heap-B/registration")
	b.ReportMetric(per(stack0, stack1), "stack-B/registration")
	b.ReportMetric(per(heap0+stack0, heap1+stack1), "mem-B/registration")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/registration")
	reportDownCPU(b, c)
	for _, g := range regs {
		if g != nil {
			_ = g.Close()
		}
	}
	cancel()
}

// reportDownCPU stops the member and reports the process's CPU from
// then on, in % of one core: over 3 s, over 10 s, and steady (from the
// first second to the tenth). The window starts as the member stops, so
// that the clients' reaction to the outage counts (the member's own
// stop costs about 2 ms); the memory the registration phase left is
// returned to the system before (FreeOSMemory), so that the runtime's
// scavenger doing it in the window does not count as the outage's cost.
func reportDownCPU(b *testing.B, c *etcdtest.Cluster) {
	debug.FreeOSMemory()
	t0, cpu0 := time.Now(), cpuTime()
	c.Stop()
	for _, ep := range c.Endpoints() {
		if conn, err := net.Dial("tcp", strings.TrimPrefix(ep, "http://")); err == nil {
			_ = conn.Close()
			b.Fatalf("the member still accepts connections at %s", ep)
		}
	}
	at := func(d time.Duration) (wall, cpu time.Duration) {
		t := time.NewTimer(time.Until(t0.Add(d)))
		defer t.Stop()
		<-t.C
		return time.Since(t0), cpuTime() - cpu0
	}
	share := func(cpu, wall time.Duration) float64 { return 100 * float64(cpu) / float64(wall) }
	wall1, cpu1 := at(time.Second)
	wall3, cpu3 := at(3 * time.Second)
	wall10, cpu10 := at(10 * time.Second)
	b.ReportMetric(share(cpu3, wall3), "cpu-%-down-3s")
	b.ReportMetric(share(cpu10, wall10), "cpu-%-down-10s")
	b.ReportMetric(share(cpu10-cpu1, wall10-wall1), "cpu-%-down-steady")
}

// bareRegister is what a clientv3 user writes: a lease, the key on it,
// and KeepAlive.
func bareRegister(ctx context.Context, cli *clientv3.Client, key subscriber.Key, in subscriber.Instance) error {
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, key, etcdreg.InstanceID(in))
	if err != nil {
		return err
	}
	v, err := etcdreg.EncodeInstance(in)
	if err != nil {
		return err
	}
	lr, err := cli.Grant(ctx, int64(etcdreg.DefaultTTL/time.Second))
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, k, string(v), clientv3.WithLease(lr.ID)); err != nil {
		return err
	}
	_, err = cli.KeepAlive(ctx, lr.ID)
	return err
}
