// Command outbox shows what a failback outbox shared by replicas in
// PostgreSQL (reboundpg) does that a bbolt file per replica cannot: three
// replica processes queue calls to one flaky provider; the provider is
// down at first, so every replica holds calls it is retrying; one replica
// is killed with SIGKILL; the provider comes back. Printed side by side,
// measured in the same run: calls delivered, duplicates the provider saw
// (at-least-once) and what was applied after its receiver-side dedupe
// (reboundpg.Dedupe), and how long after the kill the killed replica's
// calls were delivered by another replica.
//
//	go run ./examples/outbox [-calls 30] [-lease 2s]
//
// It starts its own PostgreSQL with reboundpg/pgtest (Debian's postgresql
// package: apt-get install postgresql), and runs each replica as a child
// process of itself (-replica).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

func main() {
	calls := flag.Int("calls", 30, "calls queued by each replica")
	lease := flag.Duration("lease", 2*time.Second, "lease of a claimed call (reboundpg.WithLease)")
	outage := flag.Duration("outage", 2*time.Second, "how long the provider is down at first")
	replica := flag.String("replica", "", "run as a replica: its id (internal)")
	mode := flag.String("mode", "", "replica's store: pg or bolt (internal)")
	dsn := flag.String("dsn", "", "replica's database (internal)")
	provider := flag.String("provider", "", "replica's provider URL (internal)")
	dir := flag.String("dir", "", "replica's bbolt directory (internal)")
	flag.Parse()
	if *replica != "" {
		if err := runReplica(*replica, *mode, *dsn, *provider, *dir, *calls, *lease); err != nil {
			log.Fatalf("replica %s: %v", *replica, err)
		}
		return
	}
	srv, err := pgtest.Start()
	if err != nil {
		log.Fatalf("starting PostgreSQL (apt-get install postgresql): %v", err)
	}
	defer srv.Stop()
	var res []result
	for _, m := range []string{"pg", "bolt"} {
		r, err := run(m, srv.DSN(), *calls, *lease, *outage)
		if err != nil {
			srv.Stop()
			log.Fatal(err)
		}
		res = append(res, r)
	}
	print(res, *calls, *lease)
}

// result is what one run measured.
type result struct {
	made, delivered, dups, applied, held, heldDone int
	takeover                                       time.Duration // -1: never
}

// run starts three replicas on one store kind, kills replica 2 while the
// provider is down, and measures until every call is delivered or the
// deadline.
func run(mode, dsn string, calls int, lease, outage time.Duration) (result, error) {
	ctx := context.Background()
	prov, err := startProvider(ctx, dsn, mode)
	if err != nil {
		return result{}, err
	}
	defer prov.close()
	dir, err := os.MkdirTemp("", "outbox-bolt-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := 1; i <= 3; i++ {
		cmd := exec.Command(os.Args[0], "-replica", fmt.Sprint(i), "-mode", mode, "-dsn", dsn,
			"-provider", prov.url, "-dir", dir, "-calls", fmt.Sprint(calls), "-lease", lease.String())
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		procs = append(procs, cmd)
		sc := bufio.NewScanner(out)
		if !sc.Scan() || strings.TrimSpace(sc.Text()) != "READY" {
			return result{}, fmt.Errorf("%s: replica %d did not start", mode, i)
		}
		go func() { // drain
			for sc.Scan() {
			}
		}()
	}
	// Every replica is retrying now (the provider is down): let them, then
	// kill replica 2 while it holds calls.
	time.Sleep(outage / 2)
	held := prov.heldBy("2")
	if err := procs[1].Process.Signal(syscall.SIGKILL); err != nil {
		return result{}, err
	}
	killed := time.Now()
	time.Sleep(outage / 2)
	prov.up()
	deadline := killed.Add(lease + outage + 3*time.Second)
	for time.Now().Before(deadline) && prov.delivered() < 3*calls {
		time.Sleep(50 * time.Millisecond)
	}
	r := result{made: 3 * calls, held: len(held), takeover: -1}
	r.delivered, r.dups, r.applied = prov.counts()
	var last time.Time
	for _, k := range held {
		if at, ok := prov.firstOK(k); ok {
			r.heldDone++
			if at.After(last) {
				last = at
			}
		}
	}
	if r.heldDone == r.held && r.held > 0 {
		r.takeover = last.Sub(killed)
	}
	return r, nil
}

func print(res []result, calls int, lease time.Duration) {
	fmt.Printf("3 replicas x %d calls, provider down at first, replica 2 killed (SIGKILL) mid-retry; lease %v\n\n", calls, lease)
	fmt.Printf("%-48s %22s %22s\n", "", "postgres (shared)", "bbolt (per replica)")
	row := func(name string, f func(r result) string) {
		fmt.Printf("%-48s %22s %22s\n", name, f(res[0]), f(res[1]))
	}
	row("calls queued", func(r result) string { return fmt.Sprint(r.made) })
	row("calls delivered", func(r result) string { return fmt.Sprint(r.delivered) })
	row("calls not delivered", func(r result) string { return fmt.Sprint(r.made - r.delivered) })
	row("duplicates seen by the provider", func(r result) string { return fmt.Sprint(r.dups) })
	row("duplicates applied after receiver dedupe", func(r result) string { return fmt.Sprint(r.applied - r.delivered) })
	row("calls the killed replica was retrying", func(r result) string { return fmt.Sprint(r.held) })
	row("  of them delivered by another replica", func(r result) string { return fmt.Sprint(r.heldDone) })
	row("  time from the kill to the last of them", func(r result) string {
		if r.takeover < 0 {
			return "never"
		}
		return r.takeover.Round(10 * time.Millisecond).String()
	})
}
