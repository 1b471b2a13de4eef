// Command rpc shows how an RPC framework plugs into rebound: providers
// serving JSON over HTTP register in a Nacos registry, a consumer keeps a
// cluster.RegistryDirectory of them up to date through a subscriber.Manager
// subscription, and fire-and-forget notifications go through a failback
// invoker that retries what failed in the background. Midway every provider
// crashes and replacements start on new ports; at the end the program
// accounts for every notification, checked against what the providers
// actually received.
//
// The parts, all real and all in this process:
//
//   - a registry: the in-process Nacos server of package nacostest (real
//     gRPC on loopback), or a Nacos server given with -nacos;
//   - providers: net/http servers on 127.0.0.1 serving POST /Notify, each
//     registered as an ephemeral instance by its own nacos-sdk-go client.
//     Every -shed-every-th call gets 503 with Retry-After; a notification
//     with no recipient gets 400. They record the IDs they accept;
//   - a consumer: a nacos-sdk-go client, the subscriber/nacos adapter,
//     a subscriber.Manager, a cluster.RegistryDirectory whose dial function makes
//     an HTTP invoker per instance (invoker.go: refused, reset, timed out
//     and 5xx are transient, 4xx permanent, Retry-After honoured), and a
//     failback.Invoker with hooks that keep a per-notification ledger.
//
// The crash closes every provider's HTTP server (calls in flight fail, new
// ones are refused) and its registry client (the registry drops the
// instances); -down later as many providers start on new ports and
// register. At the end the program drains pending retries (failback
// Shutdown, up to -drain), shuts everything down in the documented order
// (failback, manager bounded by -shutdown-timeout, clients, directory,
// servers) and prints how many notifications were sent,
// delivered on the first attempt, retried, delivered after retry and dropped,
// with the reason; the duplicates and missing IDs seen by the providers; and
// whether the accounting identity holds: sent = delivered + reported dropped,
// with none silently lost. It exits with status 1 if it does not.
//
// Usage:
//
//	go run ./examples/rpc [flags]
//
//	-n                 notifications to send (default 300)
//	-rate              notifications per second (default 100)
//	-senders           goroutines calling Invoke (default 4)
//	-providers         providers serving at a time (default 3)
//	-crash             crash the providers midway and replace them (default true)
//	-kill-at           crash after this fraction of -n was sent (default 0.4)
//	-down              time from the crash to starting replacements (default 1s)
//	-retries           failback retries per notification (default 4)
//	-max-tasks         failback task limit, queued + running (default 100)
//	-workers           failback retry workers (default 8)
//	-backoff           first backoff ceiling, full jitter, doubling (default 200ms)
//	-backoff-max       backoff cap (default 2s)
//	-timeout           timeout of each call (default 2s)
//	-shed-every        each provider answers every N-th call with 503 (default 20; 0 never)
//	-retry-after       the providers' Retry-After in seconds (default 1)
//	-bad-every         every N-th notification is malformed: 400 (default 100; 0 never)
//	-drain             wait for pending retries after the last send (default 10s)
//	-shutdown-timeout  bound of each shutdown step (default 5s)
//	-startup-timeout   bound of the wait for the first providers (default 20s)
//	-nacos             host:port of a Nacos HTTP API (gRPC at port+1000); default: embedded
//	-service           service name (default rebound.example.notify)
//	-progress          interval of the live progress line (default 500ms; 0 none)
//	-log               zap log level on stderr: debug, info, warn, error, off (default error)
//	-sdk-log           nacos-sdk-go's own log level, into the same log (default off)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "rpc:", err)
		os.Exit(1)
	}
}
