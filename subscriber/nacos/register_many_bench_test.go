//go:build !race

package nacos_test

// This benchmark stops the nacostest server under a live client, which
// makes nacos-sdk-go reconnect and trips its data races (see
// e2e_reconnect_test.go): it is excluded from -race builds.

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// manyRegistrations are the sizes of BenchmarkManyRegistrations: a
// registry sidecar or gateway registering many services from one client.
var manyRegistrations = []int{1000, 10000}

// memInUse returns the heap and the goroutine stacks in use, after two
// collections, and the bytes of the heap's live objects (the heap in use
// also counts the free room of its spans).
func memInUse() (heap, stack, live uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse, ms.HeapAlloc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkManyRegistrations registers n services from one client,
// through the SDK alone (baseline: the same instance, metadata included)
// and through Register, in one run, and
// reports per registration the heap, the goroutine stacks, both together,
// the heap's live objects and the goroutines, then the process's CPU while
// the registry is down (the SDK's own reconnect attempts included, and
// rebound's query connection, opened by a check before; in mode
// rebound-unchecked no check has run yet, as in the 22 s after
// registering, and the client has no query connection): over
// the first 3 s (the down event reaching every registration included),
// from 1 s to 10 s (steady) and over 10 s, and the CPU time of the first
// second. The registration phase's freed
// memory is returned to the OS before the registry stops, in both modes,
// so that the scavenger's work is not in the window. Run with
// -benchtime=1x.
func BenchmarkManyRegistrations(b *testing.B) {
	for _, n := range manyRegistrations {
		for _, mode := range []string{"sdk", "rebound", "rebound-unchecked"} {
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
	srv, err := nacostest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  nacostest.ClientConfig(b),
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseClient()
	heap0, stack0, live0 := memInUse()
	g0 := runtime.NumGoroutine()
	var regs []subscriber.Registration
	for i := range n {
		svc := fmt.Sprintf("svc-%d", i)
		in := inst("10.3.0.1", 8080)
		if mode == "sdk" {
			// The same instance, its metadata included (the SDK keeps the
			// caller's map in its redo cache).
			if ok, err := c.RegisterInstance(vo.RegisterInstanceParam{ServiceName: svc, Ip: in.IP, Port: in.Port,
				Weight: in.Weight, Enable: in.Enabled, Healthy: in.Healthy, Ephemeral: true, Metadata: in.Metadata}); !ok || err != nil {
				b.Fatalf("RegisterInstance = %v, %v", ok, err)
			}
			continue
		}
		g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: svc}, in)
		if err != nil {
			b.Fatal(err)
		}
		regs = append(regs, g)
	}
	if mode == "rebound" {
		// A client's Registrations check the server on a query
		// connection of their own, opened by the first check (every 30 s,
		// and after a reconnect or an Update): open it as a running
		// service has it, so that the outage's cost includes it.
		if err := regs[0].Update(context.Background(), inst("10.3.0.1", 8080)); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); !nacos.QueryOpen(regs[0]); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("no check opened the query connection")
			}
		}
	}
	heap1, stack1, live1 := memInUse()
	g1 := runtime.NumGoroutine()
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	b.ReportMetric(per(heap0, heap1), "heap-B/registration")
	b.ReportMetric(per(stack0, stack1), "stack-B/registration")
	b.ReportMetric(per(heap0+stack0, heap1+stack1), "mem-B/registration")
	b.ReportMetric(per(live0, live1), "live-B/registration")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/registration")
	debug.FreeOSMemory()
	srv.Stop()
	cpu0, t0 := cpuTime(), time.Now()
	at := func(d time.Duration) (time.Duration, time.Time) {
		t := time.NewTimer(time.Until(t0.Add(d)))
		<-t.C
		return cpuTime(), time.Now()
	}
	cpu1, t1 := at(time.Second)
	cpu3, t3 := at(3 * time.Second)
	cpu10, t10 := at(10 * time.Second)
	pct := func(c0, c1 time.Duration, w0, w1 time.Time) float64 {
		return 100 * float64(c1-c0) / float64(w1.Sub(w0))
	}
	// The first second holds the down event: against the same run's SDK
	// alone, it tells the event's one-off cost.
	b.ReportMetric(float64(cpu1-cpu0)/float64(time.Millisecond), "first-s-cpu-ms")
	b.ReportMetric(pct(cpu0, cpu3, t0, t3), "cpu-%-registry-down")
	b.ReportMetric(pct(cpu1, cpu10, t1, t10), "steady-cpu-%")
	b.ReportMetric(pct(cpu0, cpu10, t0, t10), "cpu-%-10s")
	for _, g := range regs {
		_ = g.Close()
	}
}
