// Command kratos runs two fleets of kratos apps side by side on one
// in-process Nacos (subscriber/nacos/nacostest, the Nacos 2.x gRPC
// protocol on loopback, with real nacos-sdk-go v2.3.2 clients), through
// the same faults, and prints what each saw:
//
//   - rebound: providers registered through reboundkratos.Registrar over
//     nacos.Register, a kratos gRPC client dialling
//     discovery:///hello-rebound.grpc through reboundkratos.Discovery over
//     a subscriber.Manager;
//
//   - baseline: the same apps with a registry that behaves like kratos'
//     contrib/registry/nacos (contrib.go): Register once per endpoint and
//     the SDK's redo, Watch subscribes once (fails when Nacos is down), a
//     capacity-1 channel, Stop unsubscribes.
//
// Run it with
//
//	go run ./examples/kratos [-outage 5s] [-phase 3s] [-interval 5ms]
//
// Scenario: three providers per fleet; Nacos refuses connections while
// the consumers start (each retries its dial every 500 ms) and comes back
// after -outage; p4 starts; Nacos restarts with fresh state for -outage,
// the first register and subscribe request of every new connection
// rejected (TPS control, reported as success by nacos-sdk-go); p5 starts;
// p1 stops with kratos.App.Stop. Each consumer makes one health Check RPC
// per -interval (5 ms: 200 RPC/s) with a -timeout (1 s) each.
package main

import (
	"flag"
	"fmt"
	"github.com/rebound-go/rebound/examples/internal/table"
	"io"
	"os"
	"strings"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func main() {
	cfg := config{}
	flag.DurationVar(&cfg.interval, "interval", 5*time.Millisecond, "time between two RPCs of one consumer")
	flag.DurationVar(&cfg.timeout, "timeout", time.Second, "timeout of each RPC")
	flag.DurationVar(&cfg.phase, "phase", 3*time.Second, "length of each phase after its event")
	flag.DurationVar(&cfg.outage, "outage", 5*time.Second, "how long Nacos is down at the start and in the restart")
	flag.Parse()
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	dir, err := os.MkdirTemp("", "rebound-kratos-example")
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	cfg.cacheDir = dir
	cfg.progress = func(p string) { fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), p) }
	res, err := run(cfg)
	_ = nacostest.RemoveDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, res)
}

func printTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "kratos v2.8.3 apps on nacostest, one RPC per %v per consumer (timeout %v), outages of %v, phases of %v\n\n",
		r.cfg.interval, r.cfg.timeout, r.cfg.outage, r.cfg.phase)
	rows := [][]string{{"", "rebound", "baseline (contrib-like)"}}
	add := func(name string, cell func(f *fleet) string) {
		row := []string{name}
		for _, f := range r.fleets {
			f.mu.Lock()
			row = append(row, cell(f))
			f.mu.Unlock()
		}
		rows = append(rows, row)
	}
	add("dial failures at start", func(f *fleet) string { return fmt.Sprint(f.dialFailures) })
	add("first RPC after Nacos is back", func(f *fleet) string { return dur(f.upAt.Sub(r.backUpAt)) })
	seen := func(n string) func(f *fleet) string {
		return func(f *fleet) string {
			f.mu.Unlock()
			defer f.mu.Lock()
			if p, ok := f.providers[n]; ok {
				return dur(f.seen(p))
			}
			return "-"
		}
	}
	add("time to see p4 (new provider)", seen("p4"))
	add("RPCs failed, Nacos restart", func(f *fleet) string {
		return fmt.Sprintf("%d of %d", f.failed[phaseRestart], f.failed[phaseRestart]+f.ok[phaseRestart])
	})
	add("time to see p5 (after restart)", seen("p5"))
	add("RPCs failed, App.Stop of p1", func(f *fleet) string {
		return fmt.Sprintf("%d of %d", f.failed[phaseStop], f.failed[phaseStop]+f.ok[phaseStop])
	})
	add("providers missing at the end", func(f *fleet) string {
		if m := r.missing[f]; len(m) > 0 {
			return fmt.Sprintf("%d (%s)", len(m), strings.Join(m, ","))
		}
		return "0"
	})
	table.Print(w, rows)
	names := [numPhases]string{"start", "new provider", "restart", "App.Stop"}
	for _, f := range r.fleets {
		for ph, e := range f.firstErr {
			if e != "" {
				fmt.Fprintf(w, "note: %s's first failed RPC in the %s phase: %s\n", f.name, names[ph], e)
			}
		}
	}
	for _, f := range r.fleets {
		if f.dialErr != "" {
			fmt.Fprintf(w, "note: %s's first dial error: %s\n", f.name, f.dialErr)
		}
	}
}

func dur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}
