package reboundpg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundpg"
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
	for _, n := range []int{0, -1, -1 << 62} {
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
