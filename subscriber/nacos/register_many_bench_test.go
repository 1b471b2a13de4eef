//go:build !race

package nacos_test

// This benchmark stops the nacostest server under a live client, which
// makes nacos-sdk-go reconnect and trips its data races (see
// e2e_reconnect_test.go): it is excluded from -race builds.

import (
	"context"
	"fmt"
	"runtime"
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

// manyRegistrations is the size of BenchmarkManyRegistrations: a registry
// sidecar or gateway registering many services from one client.
const manyRegistrations = 10000

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkManyRegistrations registers manyRegistrations services from one
// client, through the SDK alone (baseline) and through Register, and
// reports the heap and goroutines per registration, then the process's
// CPU while the registry is down (3 s; the SDK's own reconnect attempts
// included). Run with -benchtime=1x.
func BenchmarkManyRegistrations(b *testing.B) {
	for _, mode := range []string{"sdk", "rebound"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
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
				heap0, g0 := heapInUse(), runtime.NumGoroutine()
				var regs []subscriber.Registration
				for i := range manyRegistrations {
					svc := fmt.Sprintf("svc-%d", i)
					in := inst("10.3.0.1", 8080)
					if mode == "sdk" {
						if ok, err := c.RegisterInstance(vo.RegisterInstanceParam{ServiceName: svc, Ip: in.IP, Port: in.Port,
							Weight: 1, Enable: true, Healthy: true, Ephemeral: true}); !ok || err != nil {
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
				heap1, g1 := heapInUse(), runtime.NumGoroutine()
				b.ReportMetric(float64(heap1-heap0)/manyRegistrations, "heap-B/registration")
				b.ReportMetric(float64(g1-g0)/manyRegistrations, "goroutines/registration")
				srv.Stop()
				cpu0, t0 := cpuTime(), time.Now()
				deadline := time.NewTimer(3 * time.Second)
				<-deadline.C
				b.ReportMetric(100*float64(cpuTime()-cpu0)/float64(time.Since(t0)), "cpu-%-registry-down")
				for _, g := range regs {
					_ = g.Close()
				}
			}
		})
	}
}
