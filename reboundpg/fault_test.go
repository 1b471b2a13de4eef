package reboundpg_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

var errUnavailable = fmt.Errorf("provider: %w", syscall.ECONNREFUSED)

// The database restarts (an immediate shutdown: every connection cut)
// while calls are being delivered and retried: every committed call is
// delivered once the database is back.
func TestDatabaseRestartDuringDelivery(t *testing.T) {
	srv := pgtest.Shared(t)
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(200*time.Millisecond), reboundpg.WithLease(2*time.Second))
	var n atomic.Int64
	p := newProvider(func(context.Context, *cluster.Invocation) error {
		if n.Add(1)%3 != 0 { // two attempts in three fail
			return errUnavailable
		}
		return nil
	})
	newInvoker(t, st, p)
	keys := enqueue(t, pool, st, 40, false)
	waitFor(t, "some calls delivered", func() bool { k, _ := p.delivered(); return k > 5 })
	if err := srv.Restart(); err != nil {
		t.Skipf("cannot restart the server: %v", err)
	}
	// The test's own transactions go through a fresh pool: pgxpool pings
	// only connections idle for over a second, so an idle one from before
	// the restart fails its next statement ("conn closed").
	keys = append(keys, enqueue(t, newPool(t), st, 20, false)...)
	waitFor(t, "every call delivered", func() bool { k, _ := p.delivered(); return k == len(keys) })
	waitFor(t, "an empty table", func() bool { return count(t, pool, table, "true") == 0 })
	_, dups := p.delivered()
	t.Logf("60 calls, a restart of PostgreSQL mid-delivery: 0 lost, %d delivered twice", dups)
}

const (
	childTable = "REBOUNDPG_CHILD_TABLE"
	childCalls = 40
)

// A replica holding leases on calls it keeps failing to deliver is killed
// with SIGKILL; another replica delivers them all once the leases end,
// and not before.
func TestReplicaKilledHoldingLeases(t *testing.T) {
	srv := pgtest.Shared(t)
	pool := newPool(t)
	table := tableName(t)
	lease := time.Second
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(lease))
	enqueue(t, pool, st, childCalls, false)

	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaChild$", "-test.v")
	cmd.Env = append(os.Environ(), pgtest.EnvDSN+"="+srv.DSN(), childTable+"="+table)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "HOLDING ") {
	}
	if sc.Err() != nil || !strings.HasPrefix(sc.Text(), "HOLDING ") {
		t.Fatalf("the child replica did not claim the calls: %v", sc.Err())
	}
	go func() { // drain the rest
		for sc.Scan() {
		}
	}()
	p := newProvider(nil)
	newInvoker(t, st, p)
	// The child renews its leases: nothing moves while it lives.
	if n := count(t, pool, table, "owner IS NOT NULL AND locked_until > now()"); n != childCalls {
		t.Fatalf("%d calls leased by the child, want %d", n, childCalls)
	}
	if k, _ := p.delivered(); k != 0 {
		t.Fatalf("%d calls of a live replica taken over", k)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, "the killed replica's calls delivered", func() bool { k, _ := p.delivered(); return k == childCalls })
	t.Logf("%d calls of a replica killed with SIGKILL delivered by another %v after the kill (lease %v)",
		childCalls, time.Since(killed).Round(time.Millisecond), lease)
}

// TestReplicaChild is the replica TestReplicaKilledHoldingLeases starts
// and kills: it claims every call, keeps failing to deliver them, and
// says so on stdout.
func TestReplicaChild(t *testing.T) {
	table := os.Getenv(childTable)
	if table == "" {
		t.Skip("run by TestReplicaKilledHoldingLeases")
	}
	pool := newPool(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(time.Second))
	p := newProvider(func(context.Context, *cluster.Invocation) error { return errUnavailable })
	inv := newInvoker(t, st, p, failback.WithPolicy(rebound.Policy{Initial: time.Minute, Max: time.Minute}))
	waitFor(t, "calls claimed", func() bool { return inv.Stats().Offered >= childCalls })
	fmt.Println("HOLDING " + strconv.Itoa(childCalls))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the parent kills it first
	defer cancel()
	<-ctx.Done()
}
