// Command grpc runs real grpc-go servers registered in an embedded
// registry and two consumers side by side — one ClientConn on the rebound
// resolver (package reboundgrpc over a subscriber.Manager), one on a
// baseline resolver — through a scenario, and prints what each consumer
// saw, phase by phase.
//
//	go run ./examples/grpc [-registry nacos|etcd] [flags]
//
// It needs nothing but Go. With -registry nacos (the default) the
// registry is subscriber/nacos/nacostest (the Nacos 2.x gRPC protocol on
// loopback), the providers register through real nacos-sdk-go v2.3.2
// clients, and the baseline is the resolver most code has: it subscribes
// once through the SDK in Build (and fails Build when that fails), then
// relies on the SDK's cache and redo; ResolveNow does nothing. With
// -registry etcd the registry is an embedded 3-member etcd cluster
// (subscriber/etcd/etcdtest); both consumers talk to member 0 only; the
// baseline is etcd's own go.etcd.io/etcd/client/v3/naming/resolver. The
// providers' keys are in the layout of etcd's naming/endpoints (one key
// "svc/orders/<addr>" with {"Addr": ...} per provider, on its lease), the
// keys a service registering with endpoints.Manager has today; they are
// written by etcd.Register with etcd.EndpointsLayout, which keeps them
// through an outage longer than the lease TTL. rebound reads those same
// keys: the etcd adapter with etcd.WithLayout(etcd.EndpointsLayout(nil)),
// target "rebound:///svc/orders" (the drop-in for "etcd:///svc/orders").
//
// Every consumer makes one fail-fast health Check RPC per -interval
// (round_robin over the providers), with a -timeout each.
//
// # Phases
//
//   - steady: -providers providers (default 3), for -phase.
//   - churn: provider p1 crashes (its server stops; the registry drops its
//     instance: Nacos when its client's connection ends, etcd by revoking
//     its leases) and comes back as p1' on a new port.
//   - outage: the registry stops for -outage (10 s) with every provider
//     up. A third of the way in, each consumer opens a fresh ClientConn to
//     the same target (what a ClientConn leaving idle mode does: it builds
//     its resolver again) and makes 10 RPCs.
//   - recovery: the registry starts again (Nacos comes back empty; the
//     providers' SDKs register again) and provider p4 registers; the phase
//     lasts -tail (10 s) or -phase, whichever is longer.
//   - compaction (etcd only): member 0, the consumers' member, crashes;
//     meanwhile p2 crashes, p5 registers and the cluster compacts at its
//     current revision; member 0 comes back and p6 registers; the phase
//     lasts -tail or twice -phase from then on. (The issue reports etcd's
//     resolver still stale 20 s later.)
//
// For each phase and consumer it prints the RPC success rate, the calls
// per backend and, for each provider registered in the phase, the time
// from its registration to the consumer's first RPC on it ("never" if the
// consumer never used it).
//
// # Rolling restart
//
// -rolling restarts each of -providers providers (default 5) in turn,
// under -rate RPCs per second (default 200) through one ClientConn on
// rebound's resolver, each RPC taking -work (20 ms) in the provider; a
// provider stops only when the consumer uses its replacement. It does so
// twice in one run: with a plain stop (the server stops, then the
// instance is deregistered, the best case of a process that exits) and
// with reboundgrpc.Drain (deregister, -drain-wait, GracefulStop), and
// prints the failed RPCs of each. The providers register with
// etcd.Register or nacos.Register (-registry).
package main

import (
	"flag"
	"fmt"
	"github.com/rebound-go/rebound/examples/internal/table"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	cfg := config{}
	flag.StringVar(&cfg.registry, "registry", "nacos", "registry: nacos (embedded nacostest) or etcd (embedded 3-member cluster)")
	flag.IntVar(&cfg.providers, "providers", 3, "providers at the start (at least 2)")
	flag.DurationVar(&cfg.phase, "phase", 3*time.Second, "length of the steady, churn and recovery phases")
	flag.DurationVar(&cfg.outage, "outage", 10*time.Second, "how long the registry is down")
	flag.DurationVar(&cfg.interval, "interval", 5*time.Millisecond, "time between two RPCs of one consumer")
	flag.DurationVar(&cfg.timeout, "timeout", time.Second, "timeout of each RPC")
	flag.DurationVar(&cfg.tail, "tail", 10*time.Second, "least time the recovery and compaction phases watch the consumers after their last provider registered")
	rolling := flag.Bool("rolling", false, "instead of the phases: restart each of -providers providers in turn under -rate RPC/s, once with a plain stop and once with reboundgrpc.Drain, and count failed RPCs")
	rate := flag.Int("rate", 200, "-rolling: RPCs per second through the consumer")
	work := flag.Duration("work", 20*time.Millisecond, "-rolling: time each RPC takes in the provider")
	wait := flag.Duration("drain-wait", 2*time.Second, "-rolling: the wait of reboundgrpc.Drain")
	flag.Parse()
	if *rolling {
		if !isFlagSet("providers") {
			cfg.providers = 5
		}
		rc := rollingConfig{registry: cfg.registry, providers: cfg.providers, rate: *rate, work: *work, timeout: cfg.timeout, wait: *wait,
			progress: func(p string) { fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), p) }}
		if rc.providers < 1 || rc.rate < 1 || rc.rate > 100000 || rc.work < 0 || rc.wait < 0 {
			fmt.Fprintln(os.Stderr, "-rolling needs -providers >= 1, 1 <= -rate <= 100000, -work >= 0 and -drain-wait >= 0")
			os.Exit(2)
		}
		rs, err := runRolling(rc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		printRolling(os.Stdout, rc, rs)
		return
	}
	if cfg.providers < 2 {
		fmt.Fprintln(os.Stderr, "-providers must be at least 2")
		os.Exit(2)
	}
	cfg.progress = func(p string) { fmt.Fprintf(os.Stderr, "%s phase: %s\n", time.Now().Format("15:04:05.000"), p) }
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, res)
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Row labels of the table.
const (
	rowSuccess = "RPC success"
	rowCalls   = "calls per backend"
	rowTopErr  = "most frequent error"
	rowFresh   = "fresh ClientConn"
	rowSee     = "time to see "
	// etcd: from the member's (or cluster's) start to the consumer's
	// client connected again, and from then (or the provider's
	// registration, if later) to the first RPC on the provider.
	rowReady      = "client ready after restart"
	rowAfterReady = "  then sees "
)

// newIn lists the providers registered in each phase.
var newIn = map[string][]string{"churn": {"p1'"}, "recovery": {"p4"}, "compaction": {"p5", "p6"}}

func baselineName(registry string) string {
	if registry == "etcd" {
		return "baseline (etcd naming/resolver)"
	}
	return "baseline (SDK subscribe once)"
}

func printTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "registry %s, %d providers, one RPC per %v per consumer (timeout %v), phases of %v, outage %v\n\n",
		r.cfg.registry, r.cfg.providers, r.cfg.interval, r.cfg.timeout, r.cfg.phase, r.cfg.outage)
	rows := [][]string{{"phase", "", "rebound", baselineName(r.cfg.registry)}}
	for i, ph := range r.phases {
		label := ph
		add := func(name string, cell func(s *side) string) {
			row := []string{label, name}
			for _, s := range r.sides {
				row = append(row, cell(s))
			}
			rows = append(rows, row)
			label = ""
		}
		add(rowSuccess, func(s *side) string {
			p, n := s.successRate(i)
			return fmt.Sprintf("%.2f%% of %d", p, n)
		})
		add(rowCalls, func(s *side) string {
			s.mu.Lock()
			defer s.mu.Unlock()
			return perBackend(s.stats[i])
		})
		failures := false
		for _, s := range r.sides {
			s.mu.Lock()
			failures = failures || s.stats[i].failed > 0
			s.mu.Unlock()
		}
		if failures {
			add(rowTopErr, func(s *side) string {
				s.mu.Lock()
				defer s.mu.Unlock()
				if e := topErr(s.stats[i]); e != "" {
					return e
				}
				return "-"
			})
		}
		if strings.HasPrefix(ph, "outage") {
			add(rowFresh, func(s *side) string {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.fresh
			})
		}
		for _, p := range newIn[ph] {
			add(rowSee+p, func(s *side) string {
				d := r.seeDelay(s, p)
				if d < 0 {
					return "never"
				}
				return d.Round(time.Millisecond).String()
			})
		}
		if back, ok := r.backAt[ph]; ok && r.conns != nil {
			// The time to see a provider, split: the registry client's own
			// reconnect (its gRPC backoff), then the resolver's part.
			add(rowReady, func(s *side) string {
				t, ok := r.conns.readyAfter(s.name, back)
				if !ok {
					return "not ready"
				}
				return t.Sub(back).Round(time.Millisecond).String()
			})
			for _, p := range newIn[ph] {
				add(rowAfterReady+p, func(s *side) string {
					ready, ok := r.conns.readyAfter(s.name, back)
					d := r.seeDelay(s, p)
					if !ok || d < 0 {
						return "-"
					}
					from := ready
					if reg := r.regAt[p]; reg.After(from) {
						from = reg
					}
					return r.firstSeen(s, p).Sub(from).Round(time.Millisecond).String()
				})
			}
		}
	}
	table.Print(w, rows)
	for _, n := range r.notes {
		fmt.Fprintln(w, "note:", n)
	}
}
