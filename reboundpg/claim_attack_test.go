package reboundpg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

// poisonNext adds a row whose due time is infinity: it is never claimed,
// but the claim's second query (when to claim again) fails on it.
func poisonNext(t *testing.T, table string, exec func(ctx context.Context, sql string) error) {
	t.Helper()
	if err := exec(context.Background(), fmt.Sprintf(`INSERT INTO %q (method, attachments, args, due) VALUES ('Never', '{}', '[]', 'infinity')`, table)); err != nil {
		t.Fatal(err)
	}
}

// A claim whose next-due query fails after its calls were leased hands
// them over (they are held and renewed: nobody else could run them), and
// says the query failed; the Invoker delivers them.
func TestClaimNextQueryFails(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(100*time.Millisecond))
	poisonNext(t, table, func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err })
	keys := enqueue(t, pool, st, 3, false)
	calls, next, err := st.Claim(context.Background(), 10)
	if len(calls) != 3 || err == nil || next <= 0 {
		t.Fatalf("Claim with its next-due query failing: %d calls, next %v, %v; want the 3 leased calls, a wait and the error", len(calls), next, err)
	}
	// Those three are held by st: release them the way a restart would.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(100*time.Millisecond))
	keys = append(keys, enqueue(t, pool, st, 3, false)...)
	p := newProvider(nil)
	newInvoker(t, st, p)
	waitFor(t, "6 calls delivered", func() bool { k, _ := p.delivered(); return k == len(keys) })
	// Removed on delivery: a leftover is a call held and never run.
	waitFor(t, "the delivered calls removed", func() bool { return count(t, pool, table, "method = 'Notify'") == 0 })
}

// Claim of zero or fewer calls takes none and names a wait: it never asks
// its caller to claim again at once, nor sends LIMIT -1 to the database.
func TestClaimBadCount(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, st, 2, false)
	for _, n := range []int{0, -1, math.MinInt} {
		calls, next, err := st.Claim(context.Background(), n)
		if len(calls) != 0 || next <= 0 || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("Claim(%d): %d calls, next %v, %v; want none, a wait > 0, ErrInvalidArgument", n, len(calls), next, err)
		}
	}
	if n := count(t, pool, table, "owner IS NOT NULL"); n != 0 {
		t.Errorf("%d calls leased by claims of no call", n)
	}
}

// A replica dies in the middle of its claim (its backend is terminated
// while the claim's transaction holds the rows locked): the claim rolls
// back, a live replica's claim skips the locked rows without waiting and
// takes every call once the dead one's transaction is gone, with no lease
// to wait out.
func TestReplicaKilledMidClaim(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(time.Hour))
	enqueue(t, pool, st, 5, false)
	ctx := context.Background()
	dead, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Release()
	tx, err := dead.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The claim of the dying replica, as Claim sends it, inside a
	// transaction that never ends.
	tag, err := tx.Exec(ctx, fmt.Sprintf(`WITH c AS (SELECT id FROM %[1]q WHERE due <= now() ORDER BY due, id LIMIT 3 FOR UPDATE SKIP LOCKED)
		UPDATE %[1]q AS t SET owner = 'dying', locked_until = now() + interval '1 hour' FROM c WHERE t.id = c.id`, table))
	if err != nil || tag.RowsAffected() != 3 {
		t.Fatalf("the dying claim: %v, %v", tag, err)
	}
	calls, _, err := st.Claim(ctx, 10)
	if err != nil || len(calls) != 2 {
		t.Fatalf("a claim beside a claim in progress: %d calls, %v; want the 2 unlocked ones", len(calls), err)
	}
	var gone bool // the backend has exited (its locks released)
	if err := pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 60000)`, pid).Scan(&gone); err != nil || !gone {
		t.Fatalf("terminating the dying replica's backend: %v, %v", gone, err)
	}
	if n := count(t, pool, table, "owner = 'dying'"); n != 0 {
		t.Fatalf("%d rows keep the dead claim's lease", n)
	}
	rest, _, err := st.Claim(ctx, 10)
	if err != nil || len(rest) != 3 {
		t.Fatalf("a claim after the dying replica's end: %d calls, %v; want its 3", len(rest), err)
	}
	seen := map[uint64]bool{}
	for _, c := range append(calls, rest...) {
		if seen[c.ID] {
			t.Errorf("call %d handed out twice", c.ID)
		}
		seen[c.ID] = true
	}
}

// The connection of a claim breaks after the calls were read and leased
// (the claim is held: its leases are renewed), before the claim's last
// answer: the Invoker delivers those calls. Else they stay leased by a
// live Store and nobody runs them: the loss a database restart during
// delivery can cause.
func TestClaimConnectionCutAfterRows(t *testing.T) {
	for _, c := range []struct{ name, mark string }{
		{"after the claimed rows", "UPDATE 3\x00"}, // the next-due query gets no answer
		{"before ReadyForQuery", "SELECT 1\x00"},   // both answers in, the batch's end lost
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Shared(t)
			cfg, err := pgxpool.ParseConfig(srv.DSN())
			if err != nil {
				t.Fatal(err)
			}
			proxy := newCutProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
			host, port, _ := net.SplitHostPort(proxy.l.Addr().String())
			cfg.ConnConfig.Host = host
			fmt.Sscan(port, &cfg.ConnConfig.Port)
			proxied, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxied.Close)
			direct := newPool(t)
			table := tableName(t)
			// A lease of an hour: the keeper renews rarely (no UPDATE 3 of
			// its own) and a held call cannot come back by its lease ending.
			st := openStore(t, proxied, reboundpg.WithTable(table), reboundpg.WithLease(time.Hour), reboundpg.WithPollInterval(50*time.Millisecond))
			keys := enqueue(t, direct, st, 3, false)
			mark := []byte(c.mark)
			proxy.reply.Store(&mark)
			p := newProvider(nil)
			newInvoker(t, st, p)
			waitFor(t, "3 calls delivered", func() bool { k, _ := p.delivered(); return k == len(keys) })
			if proxy.cuts.Load() != 1 {
				t.Fatalf("%d connections cut, want 1 (the claim's)", proxy.cuts.Load())
			}
		})
	}
}

// A call due in a thousand years (put there by hand: the Store's own
// times are at most a Duration away) does not overflow the wait a claim
// names: the wait is the poll interval, not a millisecond.
func TestClaimNextFarAway(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(time.Second))
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %q (method, attachments, args, due) VALUES ('Later', '{}', '[]', now() + interval '1000 years')`, table)); err != nil {
		t.Fatal(err)
	}
	calls, next, err := st.Claim(context.Background(), 10)
	if err != nil || len(calls) != 0 || next != time.Second {
		t.Fatalf("Claim: %d calls, next %v, %v; want none, the poll interval (1s)", len(calls), next, err)
	}
}

// A closed Store claims nothing: its leases were released and its
// Update, Remove and Quarantine fail with ErrClosed, so a call it leased
// now could be run and never removed.
func TestClaimAfterClose(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, st, 2, false)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	calls, next, err := st.Claim(context.Background(), 10)
	if len(calls) != 0 || next <= 0 || !errors.Is(err, rebound.ErrClosed) {
		t.Errorf("Claim after Close: %d calls, next %v, %v; want none, a wait, ErrClosed", len(calls), next, err)
	}
	if n := count(t, pool, table, "owner IS NOT NULL"); n != 0 {
		t.Errorf("%d calls leased by a closed Store", n)
	}
}

// Attachments come back from a claim byte for byte, or are refused: the
// table keeps them as JSON, which would replace bytes that are not UTF-8
// (a binary metadata value, a binary key) without a word.
func TestAttachmentsRoundTrip(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	ctx := context.Background()
	good := map[string]string{"nul": "a\x00b", "unicode": "é✓𝄞", "": "empty key", failback.IdempotencyKey: "k1"}
	if _, err := st.Add(failback.StoredCall{Method: "m", Attachments: good, Args: []byte("[]"), Due: time.Now(), Born: time.Now()}); err != nil {
		t.Fatal(err)
	}
	enqueued := maps.Clone(good)
	enqueued[failback.IdempotencyKey] = "k2"
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "m", Attachments: enqueued}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	calls, _, err := st.Claim(ctx, 10) // the enqueued one (the added one is leased already)
	if err != nil || len(calls) != 1 || !maps.Equal(calls[0].Attachments, enqueued) {
		t.Fatalf("Claim: %v, %v; want the attachments %q as enqueued", calls, err, enqueued)
	}
	var loaded []map[string]string
	if err := st.Load(func(c failback.StoredCall) error { loaded = append(loaded, c.Attachments); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 || !maps.Equal(loaded[0], good) {
		t.Fatalf("Load: %q; want the attachments %q as added first", loaded, good)
	}
	for _, bad := range []map[string]string{{"bin": "\xff\xfe"}, {"\xc3": "v"}} {
		if _, err := st.Add(failback.StoredCall{Method: "m", Attachments: bad, Args: []byte("[]"), Due: time.Now(), Born: time.Now()}); err == nil {
			t.Errorf("Add with attachments %q: no error (stored altered)", bad)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "m", Attachments: bad}); err == nil {
			t.Errorf("Enqueue with attachments %q: no error (stored altered)", bad)
		}
		_ = tx.Rollback(ctx)
	}
	if n := count(t, pool, table, "true"); n != 2 {
		t.Errorf("%d rows, want the 2 good calls", n)
	}
}

// Three replicas race for one table with a short lease and slow attempts
// (longer than the lease: the keeper must renew them) that fail two times
// in three; one replica stops mid-way and the database restarts: every
// committed call is delivered and the table ends empty.
func TestReplicasRaceThroughStopAndRestart(t *testing.T) {
	srv := pgtest.Shared(t)
	pool := newPool(t)
	table := tableName(t)
	var n atomic.Int64
	p := newProvider(func(ctx context.Context, _ *cluster.Invocation) error {
		tm := time.NewTimer(300 * time.Millisecond) // longer than the lease
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if n.Add(1)%3 != 0 {
			return errUnavailable
		}
		return nil
	})
	type replica struct {
		st  *reboundpg.Store
		inv interface{ Close() error }
	}
	var rs []replica
	for range 3 {
		st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(200*time.Millisecond), reboundpg.WithPollInterval(100*time.Millisecond))
		rs = append(rs, replica{st, newInvoker(t, st, p)})
	}
	keys := enqueue(t, pool, rs[0].st, 30, false)
	waitFor(t, "some calls delivered", func() bool { k, _ := p.delivered(); return k >= 5 })
	if err := rs[2].inv.Close(); err != nil { // Invoker first, then its Store
		t.Fatal(err)
	}
	if err := rs[2].st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Skipf("cannot restart the server: %v", err)
	}
	keys = append(keys, enqueue(t, newPool(t), rs[1].st, 10, false)...) // a fresh pool: see TestDatabaseRestartDuringDelivery
	waitFor(t, "every call delivered", func() bool { k, _ := p.delivered(); return k == len(keys) })
	waitFor(t, "an empty table", func() bool { return count(t, pool, table, "true") == 0 })
	_, dups := p.delivered()
	t.Logf("%d calls, 3 replicas, one stopped, a restart: 0 lost, %d delivered twice", len(keys), dups)
}

// A claim whose context is done leases nothing and says why.
func TestClaimCancelled(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	st := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, st, 2, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls, next, err := st.Claim(ctx, 10)
	if len(calls) != 0 || next <= 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with a cancelled context: %d calls, next %v, %v; want none, a wait, context.Canceled", len(calls), next, err)
	}
	if n := count(t, pool, table, "owner IS NOT NULL"); n != 0 {
		t.Errorf("%d calls leased by a cancelled claim", n)
	}
	if calls, _, err := st.Claim(context.Background(), 10); err != nil || len(calls) != 2 {
		t.Errorf("the next claim: %d calls, %v; want 2", len(calls), err)
	}
}
