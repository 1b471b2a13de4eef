package reboundpg_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newPool connects to the shared server (or skips); the pool closes at the
// end of the test.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	srv := pgtest.Shared(t)
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var tables atomic.Int64

// tableName returns a table name of its own for t.
func tableName(t testing.TB) string {
	n := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("t%d_%s", tables.Add(1), n)
}

// openStore opens a Store that closes at the end of the test.
func openStore(t testing.TB, pool *pgxpool.Pool, opts ...reboundpg.Option) *reboundpg.Store {
	t.Helper()
	s, err := reboundpg.Open(context.Background(), pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// provider is a cluster.Invoker that records each attempt by idempotency
// key; behave (nil: succeed) decides the answer.
type provider struct {
	behave func(ctx context.Context, inv *cluster.Invocation) error
	mu     sync.Mutex
	seen   map[string]int // attempts that succeeded, by key
	tries  int
}

func newProvider(behave func(ctx context.Context, inv *cluster.Invocation) error) *provider {
	return &provider{behave: behave, seen: map[string]int{}}
}

func (p *provider) Target() string { return "provider" }

func (p *provider) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	p.mu.Lock()
	p.tries++
	p.mu.Unlock()
	if p.behave != nil {
		if err := p.behave(ctx, inv); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	p.seen[inv.Attachments[failback.IdempotencyKey]]++
	p.mu.Unlock()
	return "ok", nil
}

// delivered returns the keys delivered and the duplicates among them.
func (p *provider) delivered() (keys, dups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.seen {
		keys++
		dups += n - 1
	}
	return keys, dups
}

// fastPolicy retries quickly and without end.
var fastPolicy = rebound.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// newInvoker starts a failback Invoker on st and p; it closes at the end
// of the test, before the Store.
func newInvoker(t testing.TB, st failback.Store, p *provider, opts ...failback.Option) *failback.Invoker {
	t.Helper()
	if s, ok := st.(*reboundpg.Store); ok {
		st = s.Failback() // what a user gives failback
	}
	opts = append([]failback.Option{failback.WithStore(st, nil), failback.WithPolicy(fastPolicy),
		failback.WithMaxTasks(10000), failback.WithAttemptTimeout(5 * time.Second)}, opts...)
	inv, err := failback.New(cluster.NewStaticDirectory(p), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	return inv
}

// waitFor polls cond until it holds, failing t after a generous deadline
// (real sockets, real time).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// enqueue adds n calls of method in one transaction each, committed
// (rolled back if rollback), and returns their keys.
func enqueue(t testing.TB, pool *pgxpool.Pool, st *reboundpg.Store, n int, rollback bool) []string {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, 0, n)
	for i := range n {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Notify", Args: []any{i}})
		if err != nil {
			t.Fatal(err)
		}
		if rollback {
			err = tx.Rollback(ctx)
		} else {
			err = tx.Commit(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// count returns the rows of table matching where.
func count(t testing.TB, pool *pgxpool.Pool, table, where string) int {
	t.Helper()
	var n int
	q := fmt.Sprintf(`SELECT count(*) FROM %q WHERE %s`, table, where)
	if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
