package reboundpg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
)

// Three replicas share one table: every committed call is delivered, no
// rolled-back one is, and the table ends empty.
func TestOutboxThreeReplicas(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	p := newProvider(nil)
	var stores []*reboundpg.Store
	for range 3 {
		st := openStore(t, pool, reboundpg.WithTable(table))
		newInvoker(t, st, p)
		stores = append(stores, st)
	}
	keys := enqueue(t, pool, stores[0], 60, false)
	enqueue(t, pool, stores[1], 10, true)
	waitFor(t, "60 calls delivered", func() bool { k, _ := p.delivered(); return k >= 60 })
	waitFor(t, "an empty table", func() bool { return count(t, pool, table, "true") == 0 })
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if p.seen[k] == 0 {
			t.Errorf("call %s not delivered", k)
		}
	}
	if len(p.seen) != 60 {
		t.Errorf("delivered %d keys, want 60 (a rolled-back call was delivered?)", len(p.seen))
	}
}

// Lock contention: eight Stores claim from one table at once; every call
// is claimed by exactly one of them.
func TestClaimContention(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	var stores []*reboundpg.Store
	for range 8 {
		stores = append(stores, openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithBatch(7)))
	}
	enqueue(t, pool, stores[0], 300, false)
	var (
		mu     sync.Mutex
		owners = map[uint64]int{}
		wg     sync.WaitGroup
	)
	for i, st := range stores {
		wg.Go(func() {
			for {
				calls, _, err := st.Claim(context.Background(), 100)
				if err != nil {
					t.Error(err)
					return
				}
				if len(calls) == 0 {
					return
				}
				mu.Lock()
				for _, c := range calls {
					if prev, ok := owners[c.ID]; ok {
						t.Errorf("call %d claimed by store %d and store %d", c.ID, prev, i)
					}
					owners[c.ID] = i
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owners) != 300 {
		t.Errorf("claimed %d calls, want 300", len(owners))
	}
}

// A lease that ends mid-delivery (its holder paused past it): another
// replica takes the call over and delivers it; the first holder's Update
// then reports ErrLeaseLost and cannot move the call back.
func TestLeaseExpiresMidDelivery(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	a := openStore(t, pool, reboundpg.WithTable(table))
	b := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, a, 1, false)
	ctx := context.Background()
	calls, _, err := a.Claim(ctx, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("Claim: %d calls, %v", len(calls), err)
	}
	if got, _, _ := b.Claim(ctx, 10); len(got) != 0 {
		t.Fatalf("b claimed a call a holds")
	}
	// a pauses past its lease (on the database's clock): a's keeper does
	// not run either, so nothing renews it.
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET locked_until = now() - interval '1 second', owner = 'paused'`, table)); err != nil {
		t.Fatal(err)
	}
	got, _, err := b.Claim(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != calls[0].ID {
		t.Fatalf("b.Claim after the lease ended: %v, %v", got, err)
	}
	if err := a.Update(calls[0].ID, 1, calls[0].Due); !errors.Is(err, failback.ErrLeaseLost) {
		t.Fatalf("a.Update after losing the lease: %v, want ErrLeaseLost", err)
	}
	if err := b.Update(got[0].ID, 1, got[0].Due); err != nil {
		t.Fatalf("b.Update: %v", err)
	}
}

// A payload that no longer decodes is quarantined (WithQuarantine), with
// its reason, and the other calls are delivered.
func TestQuarantineUndecodable(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO %q (method, attachments, args) VALUES ('Notify', '{}', 'not json')`,
		`INSERT INTO %q (method, attachments, args) VALUES ('Notify', 'not json', '[]')`,
		`INSERT INTO %q (method, attachments, args, format) VALUES ('Notify', '{}', '[]', 99)`,
	} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(q, table)); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, pool, st, 3, false)
	p := newProvider(nil)
	inv := newInvoker(t, st, p, failback.WithQuarantine())
	waitFor(t, "3 calls delivered, 3 quarantined", func() bool {
		k, _ := p.delivered()
		return k == 3 && inv.Stats().Quarantined == 3
	})
	if n := count(t, pool, table, "quarantined IS NOT NULL"); n != 3 {
		t.Errorf("%d rows quarantined, want 3", n)
	}
	if n := count(t, pool, table, "quarantined LIKE '%record format 99%'"); n != 1 {
		t.Errorf("the reason of the format-99 row is not stored")
	}
}

// SQL in the table name is a name, not SQL.
func TestTableNameIsQuoted(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	victim := tableName(t)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %q (x int)`, victim)); err != nil {
		t.Fatal(err)
	}
	evil := fmt.Sprintf(`x"; DROP TABLE %q; --`, victim)
	st := openStore(t, pool, reboundpg.WithTable(evil))
	p := newProvider(nil)
	newInvoker(t, st, p)
	enqueue(t, pool, st, 2, false)
	waitFor(t, "2 calls delivered", func() bool { k, _ := p.delivered(); return k == 2 })
	if n := count(t, pool, victim, "true"); n != 0 {
		t.Fatal("victim table changed")
	}
	d, err := reboundpg.NewDedupe(ctx, pool, `d"; DROP TABLE `+victim+`; --`)
	if err != nil {
		t.Fatal(err)
	}
	_ = d
	count(t, pool, victim, "true") // still there
	drop := `DROP TABLE ` + pgx.Identifier{victim}.Sanitize() + `, ` + pgx.Identifier{evil}.Sanitize() + `, ` + pgx.Identifier{`d"; DROP TABLE ` + victim + `; --`}.Sanitize()
	if _, err := pool.Exec(ctx, drop); err != nil {
		t.Fatal(err)
	}
}

// A table dropped under the Store: Invoke says why a call could not be
// queued (ErrStore), Enqueue fails in the caller's transaction, nothing
// panics, and Close returns.
func TestTableDropped(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	p := newProvider(func(context.Context, *cluster.Invocation) error { return errUnavailable })
	inv := newInvoker(t, st, p)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TABLE %q`, table)); err != nil {
		t.Fatal(err)
	}
	_, err := inv.Invoke(ctx, &cluster.Invocation{Method: "Notify"})
	if !errors.Is(err, failback.ErrStore) {
		t.Fatalf("Invoke with the table dropped: %v, want ErrStore", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Notify"}); err == nil {
		t.Fatal("Enqueue with the table dropped: no error")
	}
}

// Open checks its options and an existing table's version.
func TestOpenRefuses(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	for _, o := range []reboundpg.Option{reboundpg.WithTable(""), reboundpg.WithLease(0), reboundpg.WithBatch(0),
		reboundpg.WithPollInterval(-1), reboundpg.WithRetention(-1), reboundpg.WithTable(string(make([]byte, 64)))} {
		if _, err := reboundpg.Open(ctx, pool, o); err == nil {
			t.Errorf("Open accepted a bad option")
		}
	}
	other := tableName(t)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %q (x int)`, other)); err != nil {
		t.Fatal(err)
	}
	if _, err := reboundpg.Open(ctx, pool, reboundpg.WithTable(other)); err == nil {
		t.Error("Open took over a table that is not an outbox")
	}
}

// Two Invokers: A's attempt hangs past its lease (A paused), B takes the
// call over and delivers it; A's attempt then fails, its Update finds the
// lease lost, and A hands the call over (DropClosed) instead of retrying.
func TestLeaseLostHandsOver(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	// A claims once (at the Enqueue's NOTIFY) and not again: the test
	// decides who holds the call.
	stA := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(time.Hour))
	stB := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(50*time.Millisecond))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pA := newProvider(func(ctx context.Context, _ *cluster.Invocation) error {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done():
		}
		return errUnavailable
	})
	invA := newInvoker(t, stA, pA)
	enqueue(t, pool, stA, 1, false)
	<-entered
	// A pauses past its lease: nothing renews it (owner 'paused' is no
	// Store's, as if A's keeper had not run either). A claim of A's that
	// was under way may take it back (A keeps its one task for it); then
	// the lease ends again.
	pB := newProvider(nil)
	newInvoker(t, stB, pB)
	waitFor(t, "B to deliver the call", func() bool {
		if _, err := pool.Exec(context.Background(), fmt.Sprintf(`UPDATE %q SET locked_until = now() - interval '1 second', owner = 'paused' WHERE locked_until > now() - interval '1 second'`, table)); err != nil {
			t.Fatal(err)
		}
		k, _ := pB.delivered()
		return k == 1
	})
	close(release)
	waitFor(t, "A to hand the call over", func() bool { return invA.Stats().Dropped[failback.ErrClosed] == 1 })
	pA.mu.Lock()
	defer pA.mu.Unlock()
	if pA.tries != 1 {
		t.Errorf("A made %d attempts, want 1 (no retry after losing the lease)", pA.tries)
	}
}

// Times are the database's: a claim reports Born as an age put on this
// process's clock, and leases end at the database's now() plus the lease,
// whatever the replica's clock says.
func TestTimesOnTheDatabaseClock(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(time.Hour))
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %q (method, attachments, args, born) VALUES ('m', '{}', '[]', now() - interval '2 hours')`, table)); err != nil {
		t.Fatal(err)
	}
	calls, _, err := st.Claim(ctx, 1)
	if err != nil || len(calls) != 1 {
		t.Fatalf("Claim: %v, %v", calls, err)
	}
	if age := time.Since(calls[0].Born); age < 119*time.Minute || age > 121*time.Minute {
		t.Errorf("Born %v ago, want 2h", age)
	}
	if n := count(t, pool, table, "locked_until BETWEEN now() + interval '59 minutes' AND now() + interval '1 hour'"); n != 1 {
		t.Error("the lease does not end one hour after the database's now()")
	}
}
