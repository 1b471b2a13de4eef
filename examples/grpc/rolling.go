package main

import (
	"context"
	"fmt"
	"github.com/rebound-go/rebound/examples/internal/table"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
)

// rollingConfig is the -rolling scenario's settings.
type rollingConfig struct {
	registry  string        // "etcd" or "nacos"
	providers int           // restarted one after the other
	rate      int           // RPCs per second through the consumer
	work      time.Duration // each RPC's time in the provider
	timeout   time.Duration // per RPC
	wait      time.Duration // reboundgrpc.Drain's wait
	progress  func(string)
}

// rollingMode is one way to stop a provider in a rolling restart.
type rollingMode struct {
	name string
	stop func(ctx context.Context, p *provider, d subscriber.Registration) error
}

var rollingModes = []rollingMode{
	{
		// What a process that exits does: the server stops (calls in
		// flight fail), and the registry hears of it afterwards (its
		// connection or its lease ends; here the deregistration at once,
		// the best case of it).
		name: "plain stop",
		stop: func(ctx context.Context, p *provider, d subscriber.Registration) error {
			p.srv.Stop()
			return d.Shutdown(ctx)
		},
	},
	{
		name: "rebound drain",
		stop: nil, // set in runRolling: reboundgrpc.Drain with cfg.wait
	},
}

// rollingResult is what one mode measured.
type rollingResult struct {
	mode       string
	ok, failed int64
	errs       map[string]int
	stopTime   []time.Duration // per provider: from the stop's start to its end
	perBackend map[string]int64
}

// startSlowProvider is startProvider whose every RPC takes work.
func startSlowProvider(name string, work time.Duration) (*provider, error) {
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	return &provider{name: name, srv: s, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}, nil
}

// runRolling restarts each of cfg.providers providers in turn, once per
// mode, under a constant load of cfg.rate RPCs per second through one
// ClientConn on rebound's resolver, and counts the failed RPCs of each
// mode. Both modes run in one process, one after the other, with the
// same registry, consumer and load.
func runRolling(cfg rollingConfig) ([]*rollingResult, error) {
	say := cfg.progress
	if say == nil {
		say = func(string) {}
	}
	var reg drainRegistry
	var err error
	switch cfg.registry {
	case "etcd":
		var r *etcdRegistry
		r, err = newEtcdRegistry()
		reg = r
	case "nacos":
		var r *nacosRolling
		r, err = newNacosRolling()
		reg = r
	default:
		return nil, fmt.Errorf("-rolling -registry %q: want etcd or nacos", cfg.registry)
	}
	if err != nil {
		return nil, err
	}
	defer reg.close()

	var live []*provider
	all := map[*provider]bool{}
	defer func() {
		for p := range all {
			p.srv.Stop()
		}
	}()
	start := func(name string) (*provider, error) {
		p, err := startSlowProvider(name, cfg.work)
		if err != nil {
			return nil, err
		}
		all[p] = true
		if err := reg.register(p); err != nil {
			return nil, err
		}
		return p, nil
	}
	for i := range cfg.providers {
		p, err := start(fmt.Sprintf("p%d", i+1))
		if err != nil {
			return nil, err
		}
		live = append(live, p)
	}
	rb, target := reg.rebound()
	s := &side{name: "rebound", build: rb, target: target}
	cc, err := s.dial()
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	if err := reachAll(cc, live, 30*time.Second); err != nil {
		return nil, err
	}

	// The load: cfg.rate RPCs a second, each in its own goroutine (at most
	// 64 at once), into the current mode's result.
	var cur atomic.Pointer[rollingResult]
	var resMu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(cfg.rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			r := cur.Load()
			if r == nil {
				continue
			}
			select {
			case sem <- struct{}{}:
			default:
				resMu.Lock()
				r.failed++
				r.errs["caller saturated (64 RPCs in flight)"]++
				resMu.Unlock()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
				defer cancel()
				var pr peer.Peer
				_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&pr))
				resMu.Lock()
				defer resMu.Unlock()
				if err != nil {
					r.failed++
					r.errs[shortErr(err)]++
					return
				}
				r.ok++
				if pr.Addr != nil {
					r.perBackend[pr.Addr.String()]++
				}
			}()
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	var results []*rollingResult
	for mi, mode := range rollingModes {
		if mode.stop == nil {
			wait := cfg.wait
			mode.stop = func(ctx context.Context, p *provider, d subscriber.Registration) error {
				return reboundgrpc.Drain(ctx, p.srv, wait, d)
			}
		}
		res := &rollingResult{mode: mode.name, errs: map[string]int{}, perBackend: map[string]int64{}}
		cur.Store(res)
		say(fmt.Sprintf("rolling restart: %s", mode.name))
		for i := range live {
			old := live[i]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t0 := time.Now()
			err := mode.stop(ctx, old, reg.deregisterer(old))
			res.stopTime = append(res.stopTime, time.Since(t0))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s of %s: %w", mode.name, old.name, err)
			}
			reg.forget(old)
			nu, err := start(fmt.Sprintf("%s.%d", old.name, mi+1))
			if err != nil {
				return nil, err
			}
			live[i] = nu
			// The next provider stops only when the consumer uses the new
			// one (what a rolling restart's readiness gate does).
			if err := reachAll(cc, []*provider{nu}, 30*time.Second); err != nil {
				return nil, err
			}
		}
		// Let the last calls of the mode finish before the next starts.
		time.Sleep(cfg.timeout)
		cur.Store(nil)
		results = append(results, res)
	}
	return results, nil
}

// reachAll makes RPCs on cc until each of ps has answered one.
func reachAll(cc *grpc.ClientConn, ps []*provider, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	want := map[string]bool{}
	for _, p := range ps {
		want[p.addr] = true
	}
	for len(want) > 0 && ctx.Err() == nil {
		var pr peer.Peer
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true), grpc.Peer(&pr)); err == nil {
			delete(want, pr.Addr.String())
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("the consumer did not reach %d provider(s) within %v", len(want), within)
	}
	return nil
}

// drainRegistry is a registry whose providers' registrations can be
// drained.
type drainRegistry interface {
	register(p *provider) error
	// deregisterer is p's registration, for Drain (or the plain stop).
	deregisterer(p *provider) subscriber.Registration
	// forget drops p once stopped.
	forget(p *provider)
	rebound() (resolver.Builder, string)
	close()
}

func printRolling(w io.Writer, cfg rollingConfig, rs []*rollingResult) {
	fmt.Fprintf(w, "rolling restart of %d providers, registry %s, %d RPC/s through rebound's resolver, %v per RPC (timeout %v), drain wait %v\n\n",
		cfg.providers, cfg.registry, cfg.rate, cfg.work, cfg.timeout, cfg.wait)
	rows := [][]string{{""}}
	for _, r := range rs {
		rows[0] = append(rows[0], r.mode)
	}
	add := func(label string, cell func(r *rollingResult) string) {
		row := []string{label}
		for _, r := range rs {
			row = append(row, cell(r))
		}
		rows = append(rows, row)
	}
	add("RPCs", func(r *rollingResult) string { return fmt.Sprint(r.ok + r.failed) })
	add("failed RPCs", func(r *rollingResult) string { return fmt.Sprint(r.failed) })
	add("most frequent error", func(r *rollingResult) string {
		type kv struct {
			k string
			v int
		}
		var kvs []kv
		for k, v := range r.errs {
			kvs = append(kvs, kv{k, v})
		}
		if len(kvs) == 0 {
			return "-"
		}
		sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k })
		return fmt.Sprintf("%dx %s", kvs[0].v, kvs[0].k)
	})
	add("time to stop one provider", func(r *rollingResult) string {
		var max, sum time.Duration
		for _, d := range r.stopTime {
			sum += d
			max = maxDur(max, d)
		}
		if len(r.stopTime) == 0 {
			return "-"
		}
		return fmt.Sprintf("mean %v, max %v", (sum / time.Duration(len(r.stopTime))).Round(time.Millisecond), max.Round(time.Millisecond))
	})
	table.Print(w, rows)
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
