package reboundpg_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundpg"
	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

// cutProxy forwards TCP connections to a server and, once armed, cuts
// one connection: when the client sends a message containing cut (before
// forwarding it, or, with after, once it is forwarded, before any
// answer), or when the server's answer contains reply (the client gets
// the answer up to the end of reply, then the connection ends).
type cutProxy struct {
	l     net.Listener
	to    string
	cut   atomic.Pointer[[]byte]
	after atomic.Bool
	reply atomic.Pointer[[]byte]
	cuts  atomic.Int32 // connections cut on a reply
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, to: to}
	p.wg.Go(p.serve)
	t.Cleanup(func() { _ = l.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.up(c, s) })
		p.wg.Go(func() { p.down(c, s) })
	}
}

// up forwards the client's messages to the server.
func (p *cutProxy) up(c, s net.Conn) {
	defer s.Close()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if cut := p.cut.Load(); cut != nil && bytes.Contains(bytes.ToLower(buf[:n]), *cut) {
			p.cut.Store(nil) // once
			_ = c.Close()    // no answer reaches the client
			if p.after.Load() {
				_, _ = s.Write(buf[:n])
			}
			return
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return
		}
	}
}

// down forwards the server's answers to the client.
func (p *cutProxy) down(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if err != nil {
			return
		}
		if m := p.reply.Load(); m != nil {
			if i := bytes.Index(buf[:n], *m); i >= 0 && p.reply.CompareAndSwap(m, nil) {
				_, _ = c.Write(buf[:i+len(*m)])
				p.cuts.Add(1)
				return
			}
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// proxiedPool returns a pool whose connections go through a cutProxy.
func proxiedPool(t *testing.T) (*pgxpool.Pool, *cutProxy) {
	srv := pgtest.Shared(t)
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	host, port, _ := net.SplitHostPort(p.l.Addr().String())
	cfg.ConnConfig.Host = host
	fmt.Sscan(port, &cfg.ConnConfig.Port)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, p
}

func createTable(t testing.TB, pool *pgxpool.Pool, ddl string) string {
	name := tableName(t)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(ddl, pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	return name
}

// A connection cut once COMMIT has left, before its answer: RunTx returns
// ErrAmbiguousCommit after one run of fn, and does not run it again —
// here the transaction did commit, so a retry would have applied it twice.
func TestRunTxAmbiguousCommit(t *testing.T) {
	pool, proxy := proxiedPool(t)
	table := createTable(t, pool, `CREATE TABLE %s (id int PRIMARY KEY)`)
	cut := []byte("commit\x00") // the statement, not a name containing it
	proxy.after.Store(true)
	proxy.cut.Store(&cut)
	var runs atomic.Int32
	err := reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(ctx context.Context, tx pgx.Tx) error {
		runs.Add(1)
		_, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{table}.Sanitize()+` VALUES (1)`)
		return err
	})
	if !errors.Is(err, reboundpg.ErrAmbiguousCommit) {
		t.Fatalf("RunTx: %v, want ErrAmbiguousCommit", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", runs.Load())
	}
	waitFor(t, "the commit to land", func() bool { return count(t, newPool(t), table, "true") == 1 })
	t.Logf("ambiguous COMMIT reported after 1 run (%v); the row is there: a retry would have inserted it twice", err)
}

// A connection cut before COMMIT (mid-transaction, by the network or by
// pg_terminate_backend): the transaction is run again, on a fresh
// connection, and commits once.
func TestRunTxConnectionCutBeforeCommit(t *testing.T) {
	pool, proxy := proxiedPool(t)
	admin := newPool(t)
	table := createTable(t, pool, `CREATE TABLE %s (id int PRIMARY KEY)`)
	ins := `INSERT INTO ` + pgx.Identifier{table}.Sanitize() + ` VALUES ($1)`
	for _, how := range []string{"network", "pg_terminate_backend"} {
		cut := []byte("cut_here")
		proxy.cut.Store(&cut)
		var runs atomic.Int32
		id := len(how)
		err := reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, ins, id); err != nil {
				return err
			}
			if runs.Add(1) > 1 {
				return nil
			}
			if how == "pg_terminate_backend" {
				if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID()); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `SELECT 'cut_here'`)
			return err
		})
		proxy.cut.Store(nil)
		if err != nil {
			t.Fatalf("%s: RunTx: %v", how, err)
		}
		if runs.Load() != 2 {
			t.Errorf("%s: fn ran %d times, want 2", how, runs.Load())
		}
		if n := count(t, admin, table, fmt.Sprintf("id = %d", id)); n != 1 {
			t.Errorf("%s: %d rows, want 1", how, n)
		}
	}
}

// RunTx's errors: fn's own error ends it at once; bad arguments are
// ArgumentErrors.
func TestRunTxErrors(t *testing.T) {
	pool := newPool(t)
	boom := errors.New("boom")
	var runs int
	err := reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(context.Context, pgx.Tx) error { runs++; return boom })
	if !errors.Is(err, boom) || runs != 1 {
		t.Errorf("RunTx with fn failing: %v after %d runs, want boom after 1", err, runs)
	}
	err = reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1/0`)
		return err
	})
	if pe, ok := errors.AsType[*pgconn.PgError](err); !ok || pe.Code != "22012" {
		t.Errorf("RunTx with a division by zero: %v", err)
	}
	if err := reboundpg.RunTx(context.Background(), nil, pgx.TxOptions{}, nil, nil); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("RunTx(nil, nil): %v", err)
	}
}

// transfers runs workers goroutines moving money between accounts, each
// transfer in a SERIALIZABLE transaction run by run; it returns the runs
// of transfer bodies (first runs and retries).
func transfers(t testing.TB, pool *pgxpool.Pool, workers, each int, run func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error) (runs int64) {
	ctx := context.Background()
	acc := createTable(t, pool, `CREATE TABLE %s (id int PRIMARY KEY, balance bigint NOT NULL)`)
	log := createTable(t, pool, `CREATE TABLE %s (id bigint PRIMARY KEY)`)
	a, l := pgx.Identifier{acc}.Sanitize(), pgx.Identifier{log}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+a+` SELECT g, 1000 FROM generate_series(0, 9) g`); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range each {
				from, to, amt := rng.IntN(10), rng.IntN(10), int64(rng.IntN(50))
				id := int64(w*each + i)
				err := run(ctx, func(ctx context.Context, tx pgx.Tx) error {
					n.Add(1)
					var bal int64
					if err := tx.QueryRow(ctx, `SELECT balance FROM `+a+` WHERE id = $1`, from).Scan(&bal); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `UPDATE `+a+` SET balance = $2 WHERE id = $1`, from, bal-amt); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `UPDATE `+a+` SET balance = balance + $2 WHERE id = $1`, to, amt); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `INSERT INTO `+l+` VALUES ($1)`, id)
					return err
				})
				if err != nil {
					t.Errorf("transfer %d: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var sum, logged int64
	if err := pool.QueryRow(ctx, `SELECT sum(balance) FROM `+a).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+l).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	if sum != 10000 || logged != int64(workers*each) {
		t.Errorf("sum %d (want 10000), %d transfers committed (want %d)", sum, logged, workers*each)
	}
	return n.Load()
}

var serializable = pgx.TxOptions{IsoLevel: pgx.Serializable}

// handLoop is the usual hand-written retry loop (as in cockroach-go's
// ExecuteTx without savepoints): run the transaction again at once on
// 40001/40P01, up to 50 times.
func handLoop(pool *pgxpool.Pool) func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
		var err error
		for range 50 {
			err = pgx.BeginTxFunc(ctx, pool, serializable, func(tx pgx.Tx) error { return fn(ctx, tx) })
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || (pe.Code != "40001" && pe.Code != "40P01") {
				return err
			}
		}
		return err
	}
}

// engineRun is RunTx on a Retrier with no attempt limit.
func engineRun(pool *pgxpool.Pool) func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	r, _ := rebound.NewRetrier(rebound.Policy{Initial: 2 * time.Millisecond, Max: 100 * time.Millisecond}, rebound.WithMaxElapsed(time.Minute))
	return func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
		return reboundpg.RunTx(ctx, pool, serializable, r, fn)
	}
}

// 16 goroutines move money between 10 accounts under SERIALIZABLE: every
// transfer commits exactly once and the sum is conserved, with RunTx and
// with the hand-written loop; the retries of each are logged.
func TestRunTxContendedTransfers(t *testing.T) {
	pool := newPool(t)
	const workers, each = 16, 6
	eng := transfers(t, pool, workers, each, engineRun(pool))
	hand := transfers(t, pool, workers, each, handLoop(pool))
	t.Logf("%d transfers: RunTx ran %d bodies (%d retries), the hand-written loop %d (%d retries)",
		workers*each, eng, eng-workers*each, hand, hand-workers*each)
}
