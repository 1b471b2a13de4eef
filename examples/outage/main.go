// Command outage shows, in one command and about two minutes, what rebound
// does for a Go service when its service registry goes down and comes back
// empty, with numbers measured on your machine and a picture.
//
//	go run ./examples/outage [flags]
//
// It needs nothing but Go: it starts an in-process Nacos server
// (subscriber/nacos/nacostest, real gRPC over loopback), provider processes
// that register ephemeral instances through real nacos-sdk-go v2.3.2
// clients, and consumer processes that subscribe through real nacos-sdk-go
// clients: 20 consumers x 50 services by default, every consumer
// subscribing to every service, every provider registering one instance in
// every service. Each "process" is a client of its own in this one process.
//
// # The scenario
//
// Every subscription is confirmed and every listener has the providers'
// instances. Then the registry goes down for -down (nacostest Server.Stop:
// every connection fails at once) and restarts empty on the same address
// (Server.Start). The providers re-register (how depends on the run, see
// below). By default the restarted registry's TPS control trips on the
// reconnect storm, as Nacos 2.x's does: it rejects the first -tps-reject
// (10) SubscribeServiceRequests and the first -tps-reject-register (1)
// InstanceRequests (registers) of every new connection, in Nacos' own
// response types (SubscribeServiceResponse, InstanceResponse, errorCode
// 503, success false), which nacos-sdk-go v2.3.2 reports as success (its
// redo counts both as done); and -restarts (2) consumers are restarted
// while the registry is down. -clean runs a clean restart instead (no
// rejection, no consumer restarted).
// The consumers must converge again to the registry's truth: every
// subscription in place at the registry and every listener holding the
// right list. The program waits up to -timeout for that. Then one more
// provider registers in every service: a listener whose subscription was
// silently lost misses that change.
//
// The scenario runs three times, each time with fresh clients and a fresh
// server. The sdk run is nacos-sdk-go alone, the baseline: one
// client.Subscribe per service when the consumer starts, its error ignored,
// then the SDK's redo after every reconnect. The naive run uses the
// subscribe loop most code has, run once per service when the consumer
// starts:
//
//	for {
//		err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: onChange})
//		if err == nil {
//			break
//		}
//		time.Sleep(1 * time.Second)
//	}
//
// after which it relies on nacos-sdk-go's own redo to resubscribe after a
// reconnect.
//
// The providers follow the run. sdk: one client.RegisterInstance per
// service at start-up, then the SDK's redo. naive: the register loop most
// code has, at start-up, per service:
//
//	for {
//		_, err := client.RegisterInstance(param) // the bool is not looked at
//		if err == nil {
//			break
//		}
//		time.Sleep(1 * time.Second)
//	}
//
// then the SDK's redo: after a restart it does what the SDK alone does (a
// rejected register returns false with a nil error, and the loop only runs
// at start-up). rebound: one nacos.Register per service, which checks
// after each reconnect (the redo grace, 1 s) whether the SDK's redo
// registered the instance again and registers what is missing. Every Subscribe call appends onChange to the SDK's callbacks
// once more, so a service subscribed after failures delivers each change
// several times. With -naive-nosleep the loop retries at once, at most
// -nosleep-cap calls per service. The rebound run uses one
// subscriber.Manager per consumer over subscriber/nacos, with rebound's
// default policy (full jitter, 1 s doubling to 30 s; see -jitter) and the
// Manager's default shared limiter.
//
// With -restarts N (default 2), N consumers are also restarted while the
// registry is down (closed without unsubscribing, replaced by new clients
// with new listeners that subscribe at once): the case where the naive
// loop meets failures.
//
// # Output
//
// With -v, stderr gets a live progress line: the run, its phase, the
// subscriptions in place at the registry, the listeners holding the right
// list and the registry's requests per second. On a terminal the line is
// rewritten in place; otherwise a line is written every second. It ends
// with each run's timings, and, for a run that did not converge, the
// status of every subscription that did not. Without -v stderr gets only
// what asks you to act (-nacos) and errors.
//
// stdout gets a table, one column per run (sdk, naive, rebound): how long
// the registry was down (measured), the CPU time the process used during
// the outage and during the recovery (getrusage user+system), the
// subscribe calls the consumers made during the outage and during the
// recovery, the SubscribeServiceRequests and all requests the registry
// received during the recovery, the most requests in any 100 ms window of
// it, the subscribes the TPS control rejected, the time from the restart
// until every subscription was back with the right list, the
// subscriptions still missing then, the time the providers took to
// re-register, the provider instances (one per provider per service) the
// registry did not list when the recovery window ended, the register
// requests (InstanceRequests) it received during the window, the
// registers its TPS control rejected, the times until every subscription
// was held by the
// registry and until the consumer code also confirmed it, the
// notifications lost (listeners whose final list differs
// from the registry's after the change made after the recovery) and
// duplicated (listener calls with the same list as that listener's
// previous call), the empty lists delivered from the outage on (to
// listeners that had instances, and as first lists of listeners started
// during the outage), and the subscriptions the consumer code gave up. A
// last row is the price of rebound's empty-list hold (-emptied): once the
// rest is measured, every instance of one service is deregistered for
// real, and the row is the time until every listener that had the
// service's list holds the empty list (the SDK passes it on with the push;
// rebound's Manager, within subscriber.WithEmptyListHold of the reconnect,
// delivers it when the hold ends).
//
// The verdict comes first, before the scenario and the table: per run,
// whether every subscription and registration came back and what was
// lost, then rebound against the SDK alone (SubscribeServiceRequests
// during the recovery and the time until every subscription was back).
// The PNG (-out, default
// outage.png in the OS temp directory; "" for none; its path is printed)
// draws the registry's requests and the consumers' subscribe calls per
// 100 ms, one panel per run, with the outage shaded.
//
// # A real Nacos server
//
// With -nacos host:port (the HTTP port; nacos-sdk-go dials gRPC at port +
// 1000) the program uses that server instead of the embedded one, with
// service names of its own. It cannot stop the server: after the
// subscriptions are confirmed it asks you, on stderr, to restart the server
// (stop it, keep it down for about -down, start it), waits up to 60 s for a
// consumer's client to see it go down and up to -down + 60 s for it to come
// back, then measures the recovery as above; it does this once per run. The
// outage is timed from the moment that client saw the server go down to
// the moment it saw it back. The registry-side counts (requests, peak,
// providers) are not observable there and show "n/a"; "missing" then means
// not confirmed by the consumer code. A server that keeps its data across
// the restart makes the scenario milder than the embedded one.
//
// # Flags
//
//	-clients      consumers (default 20)
//	-subs         services; every consumer subscribes to each (default 50)
//	-providers    providers, one instance per service each (default 3)
//	-down         how long the registry is down (default 10s)
//	-timeout      how long to wait for the recovery after the restart (default 10s)
//	-restarts     consumers restarted while the registry is down (default 2)
//	-tps-reject   subscribes rejected per new connection by TPS control (default 10)
//	-tps-reject-register
//	              registers rejected per new connection by TPS control (default 1)
//	-clean        a clean restart: -restarts 0 -tps-reject 0 -tps-reject-register 0
//	-naive-nosleep, -nosleep-cap
//	              naive loop without the sleep, capped per service (default off, 1000)
//	-jitter       rebound's jitter: full (default), equal, decorrelated, none
//	-update-cache-when-empty
//	              nacos-sdk-go's UpdateCacheWhenEmpty for every client (default true)
//	-only         run only "sdk", "naive" or "rebound"
//	-nacos        host:port of a real Nacos server (default: embedded)
//	-out          PNG path (default outage.png in os.TempDir(); "" = none)
//	-serve        host:port: serve the status page (/debug/rebound) and
//	              Prometheus metrics (/metrics) while running; prints the URLs
//	-keep         with -serve: keep serving after the scenario until interrupted
//	-emptied      measure the price of the empty-list hold (default true; see below)
//	-v            progress and per-run timings on stderr (default: the table only)
//
// nacos-sdk-go's own log goes to a temporary directory while its clients
// start and is discarded afterwards; its cache files go to a temporary
// directory removed at the end. nacos-sdk-go v2.3.2 never stops its UDP
// push receiver and log file goroutines; every other goroutine is stopped
// before the program ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"time"
)

// usageSummary is printed by -h above the flags.
const usageSummary = `Runs the same registry outage three times against nacos-sdk-go clients: with
nacos-sdk-go alone (sdk), with the subscribe loop most code has (naive) and with
rebound's subscriber.Manager (providers: the SDK's RegisterInstance, a naive
register loop, nacos.Register), and prints what each cost and whether every
subscription and registration recovered. By default the restarted registry's
TPS control rejects part of the reconnect storm (subscribes and registers) and
two consumers restart during the outage.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "outage:", err)
		os.Exit(1)
	}
}

// run is the program: it parses args, runs the scenario with the naive
// consumers and then with rebound, prints the table to stdout and writes
// the PNG. Progress goes to stderr with -v.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.serve != "" {
		stop, err := serve(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	prog := newProgress(stderr, cfg.verbose)
	defer prog.close()
	var results []result
	for _, m := range cfg.modes {
		res, err := runScenario(ctx, cfg, m, prog)
		if err != nil {
			return fmt.Errorf("%s run: %w", m, err)
		}
		results = append(results, res)
		tm := res.timing
		prog.note("%s run took %v: set-up %v, subscribing %v, outage %v, recovery %v, change %v, closing %v", m,
			round(tm.total), round(tm.setUp), round(tm.subscribe), round(tm.outage), round(tm.recovery), round(tm.change), round(tm.closing))
	}
	prog.note("outage: total %v", round(time.Since(start)))
	prog.close()
	if err := printTable(stdout, cfg, results); err != nil {
		return err
	}
	if cfg.out == "" {
		return nil
	}
	if !slices.ContainsFunc(results, func(r result) bool { return r.restarted }) {
		fmt.Fprintf(stdout, "\nno PNG: the registry was not restarted\n")
		return nil
	}
	if err := writePNG(cfg.out, cfg, results); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", cfg.out)
	return nil
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
