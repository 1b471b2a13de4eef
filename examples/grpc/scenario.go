package main

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// config is the scenario's settings (see the flags in main.go).
type config struct {
	registry  string        // "nacos" or "etcd"
	providers int           // at the start
	phase     time.Duration // length of the steady, churn and recovery phases
	outage    time.Duration // registry down
	interval  time.Duration // between two RPCs of one consumer
	timeout   time.Duration // per RPC
	tail      time.Duration // least time the recovery and compaction phases watch after their last provider registered
	progress  func(string)  // phase changes; nil for none
}

// provider is a real grpc-go server (the health service) on loopback.
type provider struct {
	name string
	srv  *grpc.Server
	addr string
	port uint64
}

func startProvider(name string) (*provider, error) {
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	return &provider{name: name, srv: s, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}, nil
}

// phaseStats counts one consumer's RPCs in one phase.
type phaseStats struct {
	ok, failed int
	perBackend map[string]int // by provider name
	errs       map[string]int // by status message
}

// side is one consumer: a ClientConn on one resolver, making RPCs.
type side struct {
	name   string
	build  resolver.Builder
	target string
	cc     *grpc.ClientConn

	mu        sync.Mutex
	phase     int
	stats     []*phaseStats
	firstSeen map[string]time.Time // by provider name
	fresh     string               // the fresh ClientConn's result
}

const serviceConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

func (s *side) dial() (*grpc.ClientConn, error) {
	return grpc.NewClient(s.target,
		grpc.WithResolvers(s.build),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig))
}

// result is what run measured.
type result struct {
	cfg     config
	phases  []string
	sides   []*side
	regAt   map[string]time.Time // provider name -> registered
	newOnes []string             // providers registered during the run, in order
	names   map[string]string    // addr -> provider name
	notes   []string
	// backAt: phase -> when the consumers' member (etcd) or the registry
	// came back, for the rows that split the time to see a provider into
	// the client's reconnect and rebound's own part.
	backAt map[string]time.Time
	conns  connReporter // nil when the registry reports no connection
}

// connReporter tells when a consumer's registry client was connected
// again (etcd: its gRPC connection Ready).
type connReporter interface {
	readyAfter(side string, t time.Time) (time.Time, bool)
}

// run plays the scenario once with both consumers side by side.
func run(cfg config) (*result, error) {
	say := cfg.progress
	if say == nil {
		say = func(string) {}
	}
	var reg registry
	var err error
	switch cfg.registry {
	case "nacos":
		reg, err = newNacosRegistry()
	case "etcd":
		reg, err = newEtcdRegistry()
	default:
		return nil, fmt.Errorf("-registry %q: want nacos or etcd", cfg.registry)
	}
	if err != nil {
		return nil, err
	}
	defer reg.close()

	res := &result{cfg: cfg, regAt: map[string]time.Time{}, names: map[string]string{}, backAt: map[string]time.Time{}}
	if cr, ok := reg.(connReporter); ok {
		res.conns = cr
	}
	var nameMu sync.Mutex
	var provs []*provider
	defer func() {
		for _, p := range provs {
			p.srv.Stop()
		}
	}()
	// register names p and registers it with the registry; measure: its
	// registration time is the start of its "time to see" row.
	register := func(p *provider, name string, measure bool) error {
		provs = append(provs, p)
		nameMu.Lock()
		res.names[p.addr] = name
		nameMu.Unlock()
		if err := reg.register(p); err != nil {
			return err
		}
		if measure {
			nameMu.Lock()
			res.regAt[name] = time.Now()
			res.newOnes = append(res.newOnes, name)
			nameMu.Unlock()
		}
		return nil
	}
	addProvider := func(name string, measure bool) (*provider, error) {
		p, err := startProvider(name)
		if err != nil {
			return nil, err
		}
		return p, register(p, name, measure)
	}
	crash := func(p *provider) {
		p.srv.Stop()
		reg.deregister(p)
	}
	nameOf := func(addr string) string {
		nameMu.Lock()
		defer nameMu.Unlock()
		if n, ok := res.names[addr]; ok {
			return n
		}
		return addr
	}

	for i := range cfg.providers {
		if _, err := addProvider(fmt.Sprintf("p%d", i+1), false); err != nil {
			return nil, err
		}
	}
	rb, rt := reg.rebound()
	bb, bt := reg.baseline()
	res.sides = []*side{
		{name: "rebound", build: rb, target: rt, firstSeen: map[string]time.Time{}},
		{name: "baseline", build: bb, target: bt, firstSeen: map[string]time.Time{}},
	}
	for _, s := range res.sides {
		if s.cc, err = s.dial(); err != nil {
			return nil, err
		}
		defer s.cc.Close()
		// Wait until the consumer reaches every provider.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		seen := map[string]bool{}
		for len(seen) < cfg.providers && ctx.Err() == nil {
			var pr peer.Peer
			if _, err := healthpb.NewHealthClient(s.cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true), grpc.Peer(&pr)); err == nil {
				seen[pr.Addr.String()] = true
			}
		}
		cancel()
		if len(seen) < cfg.providers {
			return nil, fmt.Errorf("%s consumer reached %d of %d providers at the start", s.name, len(seen), cfg.providers)
		}
	}

	// Load: every consumer makes one RPC per interval.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var phaseIdx atomic.Int32
	newPhase := func(name string) {
		res.phases = append(res.phases, name)
		for _, s := range res.sides {
			s.mu.Lock()
			s.stats = append(s.stats, &phaseStats{perBackend: map[string]int{}, errs: map[string]int{}})
			s.phase = len(s.stats) - 1
			s.mu.Unlock()
		}
		phaseIdx.Store(int32(len(res.phases) - 1))
		say(name)
	}
	newPhase("steady")
	for _, s := range res.sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := healthpb.NewHealthClient(s.cc)
			tick := time.NewTicker(cfg.interval)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				var pr peer.Peer
				ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
				_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&pr))
				cancel()
				now := time.Now()
				s.mu.Lock()
				st := s.stats[s.phase]
				if err != nil {
					st.failed++
					st.errs[shortErr(err)]++
				} else {
					st.ok++
					n := nameOf(pr.Addr.String())
					st.perBackend[n]++
					if _, ok := s.firstSeen[n]; !ok {
						s.firstSeen[n] = now
					}
				}
				s.mu.Unlock()
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	sleep := time.Sleep

	sleep(cfg.phase)

	// Churn: p1 crashes and comes back on a new port. p1' listens before
	// p1 stops, so that it cannot be given p1's port: the consumers, still
	// connected to that address, would reach p1' before it registered.
	newPhase("churn")
	next, err := startProvider("p1'")
	if err != nil {
		return nil, err
	}
	crash(provs[0])
	if err := register(next, "p1'", true); err != nil {
		return nil, err
	}
	sleep(cfg.phase)

	// Registry outage with every provider up; midway, a fresh ClientConn
	// (what a ClientConn leaving idle mode does: build its resolver again)
	// makes RPCs.
	newPhase(fmt.Sprintf("outage %v", cfg.outage))
	reg.stop()
	outageStart := time.Now()
	sleep(cfg.outage / 3)
	// A resolver whose Build blocks on the registry blocks the RPC too,
	// whatever its deadline (grpc-go builds the resolver when the first RPC
	// leaves idle mode): results not in by the end of the outage are
	// reported as blocked; the goroutines finish after the registry is back
	// and are waited for at the end.
	freshDeadline := outageStart.Add(cfg.outage - 100*time.Millisecond)
	freshDone := make([]chan string, len(res.sides))
	for i, s := range res.sides {
		freshDone[i] = make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			freshDone[i] <- freshConn(s, cfg, freshDeadline)
		}()
	}
	wait := time.NewTimer(time.Until(freshDeadline) + 50*time.Millisecond)
	for i, s := range res.sides {
		var out string
		select {
		case out = <-freshDone[i]:
		case <-wait.C:
			out = "0/10 ok (the first RPC was still blocked when the outage ended: Build blocked on the registry)"
		}
		s.mu.Lock()
		s.fresh = out
		s.mu.Unlock()
	}
	wait.Stop()
	sleep(time.Until(outageStart.Add(cfg.outage)))
	newPhase("recovery")
	res.backAt["recovery"] = time.Now()
	if err := reg.start(); err != nil {
		return nil, err
	}
	if _, err := addProvider("p4", true); err != nil {
		return nil, err
	}
	sleep(max(cfg.phase, cfg.tail))

	if er, ok := reg.(*etcdRegistry); ok {
		// The consumers' member crashes; meanwhile p2 goes away, p5 comes
		// and the cluster compacts; the member comes back and p6 comes.
		newPhase("compaction")
		er.c.StopMember(0)
		crash(provs[1])
		if _, err := addProvider("p5", true); err != nil {
			return nil, err
		}
		if err := er.compact(); err != nil {
			res.notes = append(res.notes, "compact: "+err.Error())
		}
		sleep(cfg.phase / 2)
		res.backAt["compaction"] = time.Now()
		if err := er.c.StartMember(0); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := er.c.WaitReady(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		if _, err := addProvider("p6", true); err != nil {
			return nil, err
		}
		sleep(max(2*cfg.phase, cfg.tail))
	}
	close(stop)
	wg.Wait()
	if n, ok := reg.(interface{ endNotes() []string }); ok {
		res.notes = append(res.notes, n.endNotes()...)
	}
	return res, nil
}

// freshConn dials a new ClientConn of s and makes 10 fail-fast RPCs, one
// after the other, all before deadline (an RPC not made by then counts as
// failed).
func freshConn(s *side, cfg config, deadline time.Time) string {
	cc, err := s.dial()
	if err != nil {
		return "dial: " + err.Error()
	}
	defer cc.Close()
	ok := 0
	var last error
	const n = 10
	all, cancelAll := context.WithDeadline(context.Background(), deadline)
	defer cancelAll()
	for range n {
		ctx, cancel := context.WithTimeout(all, cfg.timeout)
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil {
			ok++
		} else {
			last = err
		}
	}
	out := fmt.Sprintf("%d/%d ok", ok, n)
	if last != nil {
		out += " (" + shortErr(last) + ")"
	}
	return out
}

func shortErr(err error) string {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Code().String() + ": " + st.Message()
	}
	if len(msg) > 60 {
		msg = msg[:57] + "..."
	}
	return msg
}

// successRate returns a side's success rate in phase i, in percent.
func (s *side) successRate(i int) (float64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats[i]
	n := st.ok + st.failed
	if n == 0 {
		return 0, 0
	}
	return 100 * float64(st.ok) / float64(n), n
}

// seeDelay returns how long after its registration a side first reached
// the provider, or -1 if it never did.
// firstSeen is when s first reached the provider name (zero if never).
func (r *result) firstSeen(s *side, name string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstSeen[name]
}

func (r *result) seeDelay(s *side, name string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.firstSeen[name]
	if !ok {
		return -1
	}
	return t.Sub(r.regAt[name])
}

func perBackend(st *phaseStats) string {
	names := make([]string, 0, len(st.perBackend))
	for n := range st.perBackend {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d", n, st.perBackend[n])
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

func topErr(st *phaseStats) string {
	best, n := "", 0
	for e, c := range st.errs {
		if c > n || c == n && e < best {
			best, n = e, c
		}
	}
	return best
}
