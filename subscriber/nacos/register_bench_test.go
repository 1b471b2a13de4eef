//go:build !race

package nacos_test

// The benchmarks restart the nacostest server, which makes nacos-sdk-go
// reconnect and trips its data races (see e2e_reconnect_test.go): they
// are excluded from -race builds.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// benchProviders is the size of each fleet in the restart benchmarks:
// one client per provider, as one process per provider would have.
const benchProviders = 20

// fleet is benchProviders providers of service "svc-i" on one server,
// registered through rebound (Register, default options) or the SDK
// alone (RegisterInstance, Ephemeral).
type fleet struct {
	srv *nacostest.Server
}

func newFleet(b *testing.B, rebound bool) *fleet {
	b.Helper()
	srv, err := nacostest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	for i := range benchProviders {
		c, err := clients.NewNamingClient(vo.NacosClientParam{
			ClientConfig:  nacostest.ClientConfig(b),
			ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.CloseClient)
		svc := fmt.Sprintf("svc-%d", i)
		in := inst("10.1.0.1", uint64(8000+i))
		if rebound {
			g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: svc}, in)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = g.Close() })
			continue
		}
		ok, err := c.RegisterInstance(vo.RegisterInstanceParam{ServiceName: svc, Ip: in.IP, Port: in.Port,
			Weight: 1, Enable: true, Healthy: true, Ephemeral: true})
		if err != nil || !ok {
			b.Fatalf("RegisterInstance = %v, %v", ok, err)
		}
	}
	return &fleet{srv: srv}
}

// registered counts the fleet's providers the server lists.
func (f *fleet) registered() int {
	n := 0
	for i := range benchProviders {
		if listed(f.srv, fmt.Sprintf("svc-%d", i), "10.1.0.1", uint64(8000+i)) {
			n++
		}
	}
	return n
}

// restartBoth restarts both fleets' servers, optionally rejecting the
// first register request of each new connection, and follows them for
// window: it returns, per fleet, the share registered at the end and the
// time until all were (-1: not within window).
func restartBoth(b *testing.B, reject bool, window time.Duration, fleets ...*fleet) (share []float64, all []time.Duration) {
	b.Helper()
	for _, f := range fleets {
		if reject {
			if err := f.srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{FirstPerConnection: 1}); err != nil {
				b.Fatal(err)
			}
		}
		f.srv.ResetStats()
		f.srv.Stop()
	}
	for _, f := range fleets {
		if err := f.srv.Start(); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	all = make([]time.Duration, len(fleets))
	for i := range all {
		all[i] = -1
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < window {
		<-tick.C
		for i, f := range fleets {
			if all[i] < 0 && f.registered() == benchProviders {
				all[i] = time.Since(start)
			}
		}
	}
	for _, f := range fleets {
		share = append(share, 100*float64(f.registered())/benchProviders)
	}
	return share, all
}

// seconds is d in seconds, or -1 for a negative d (never).
func seconds(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return d.Seconds()
}

// BenchmarkRestartWithRejectedRedo: the registry restarts empty and its
// TPS control rejects the first register request of each new connection
// (which the SDK's redo counts as done). Reports the share of providers
// registered again 5 s after the restart, and the time until all were,
// for rebound's Register and for the SDK alone (the baseline, in the same
// run). Run with -benchtime=1x: each iteration restarts two servers and
// waits 5 s.
func BenchmarkRestartWithRejectedRedo(b *testing.B) {
	b.ReportAllocs()
	reb, sdk := newFleet(b, true), newFleet(b, false)
	for b.Loop() {
		share, all := restartBoth(b, true, 5*time.Second, reb, sdk)
		b.ReportMetric(share[0], "rebound-%registered@5s")
		b.ReportMetric(share[1], "sdk-%registered@5s")
		b.ReportMetric(seconds(all[0]), "rebound-s-until-all")
		b.ReportMetric(seconds(all[1]), "sdk-s-until-all")
		rs, ss := reb.srv.Stats(), sdk.srv.Stats()
		b.ReportMetric(float64(rs.Requests[nacostest.RequestInstance])/benchProviders, "rebound-registers/provider")
		b.ReportMetric(float64(ss.Requests[nacostest.RequestInstance])/benchProviders, "sdk-registers/provider")
		for _, f := range []*fleet{reb, sdk} {
			_ = f.srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{})
		}
	}
}

// BenchmarkCleanRestartRequests: a clean restart (no rejection). Reports,
// per provider, the register requests the server received in the 5 s
// after the restart and rebound's checks (ServiceQueryRequests), for
// rebound's Register and for the SDK alone (its redo), in the same run.
// Run with -benchtime=1x.
func BenchmarkCleanRestartRequests(b *testing.B) {
	b.ReportAllocs()
	reb, sdk := newFleet(b, true), newFleet(b, false)
	for b.Loop() {
		share, _ := restartBoth(b, false, 5*time.Second, reb, sdk)
		rs, ss := reb.srv.Stats(), sdk.srv.Stats()
		b.ReportMetric(share[0], "rebound-%registered@5s")
		b.ReportMetric(share[1], "sdk-%registered@5s")
		b.ReportMetric(float64(rs.Requests[nacostest.RequestInstance])/benchProviders, "rebound-registers/provider")
		b.ReportMetric(float64(ss.Requests[nacostest.RequestInstance])/benchProviders, "sdk-registers/provider")
		b.ReportMetric(float64(rs.Requests[nacostest.RequestServiceQuery])/benchProviders, "rebound-checks/provider")
	}
}

// BenchmarkDeregisterVisible measures what Drain's wait must cover: the
// time from the start of a Registration's Shutdown (its deregister
// request) to a rebound consumer (a Manager over this package's
// Registry, another client) delivering the list without the instance,
// through nacostest's push over loopback, and Shutdown's own duration
// (deregister, then the query that confirms it). Reports means and the
// maximum over the iterations.
func BenchmarkDeregisterVisible(b *testing.B) {
	b.ReportAllocs()
	srv, err := nacostest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	newC := func() naming_client.INamingClient {
		c, err := clients.NewNamingClient(vo.NacosClientParam{
			ClientConfig:  nacostest.ClientConfig(b),
			ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.CloseClient)
		return c
	}
	reg, err := nacos.New(newC())
	if err != nil {
		b.Fatal(err)
	}
	m, err := subscriber.New(reg, subscriber.WithEmptyListHold(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	lists := make(chan int, 16)
	key := subscriber.Key{Service: "drain"}
	if _, err := m.Subscribe(context.Background(), key, func(l []subscriber.Instance) { lists <- len(l) }); err != nil {
		b.Fatal(err)
	}
	waitLen := func(n int) {
		t := time.NewTimer(e2eTimeout)
		defer t.Stop()
		for {
			select {
			case got := <-lists:
				if got == n {
					return
				}
			case <-t.C:
				b.Fatalf("no list of %d instances within %v", n, e2eTimeout)
			}
		}
	}
	provider := newC()
	var shut, total, worst time.Duration
	for b.Loop() {
		g, err := nacos.Register(context.Background(), provider, key, inst("10.2.0.1", 8080))
		if err != nil {
			b.Fatal(err)
		}
		waitLen(1)
		start := time.Now()
		if err := g.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		shut += time.Since(start)
		waitLen(0)
		d := time.Since(start)
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(shut.Microseconds())/float64(b.N)/1000, "ms-mean-shutdown")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms-mean-to-consumer")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-max-to-consumer")
}
