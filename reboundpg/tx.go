package reboundpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rebound-go/rebound"
)

// DB is what RunTx and Dedupe need of a database: *pgxpool.Pool and
// *pgx.Conn implement it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// ErrAmbiguousCommit is wrapped by RunTx's error when COMMIT was sent and
// no answer came: the transaction may have committed. RunTx never retries
// it; the caller decides.
var ErrAmbiguousCommit = errors.New("reboundpg: COMMIT sent, no answer: the transaction may have committed")

// txRetrier is RunTx's default: up to 10 attempts, 5 ms to 1 s apart with
// full jitter.
var txRetrier, _ = rebound.NewRetrier(rebound.Policy{Initial: 5 * time.Millisecond, Max: time.Second}, rebound.WithMaxAttempts(10))

// RunTx runs fn in a transaction begun with opts and commits it. On a
// serialization failure, a deadlock, or a connection broken before COMMIT,
// fn runs again in a new transaction, paced by r (nil: 10 attempts, 5 ms to
// 1 s). fn must not end tx and must be safe to repeat; an unknown COMMIT
// outcome is ErrAmbiguousCommit.
func RunTx(ctx context.Context, db DB, opts pgx.TxOptions, r *rebound.Retrier, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if db == nil || fn == nil {
		return &rebound.ArgumentError{Func: "reboundpg.RunTx", Arg: "db and fn", Reason: "must not be nil"}
	}
	if r == nil {
		r = txRetrier
	}
	return r.Do(ctx, func(ctx context.Context) error { return runTxOnce(ctx, db, opts, fn) })
}

// runTxOnce is one attempt of RunTx: its error is marked transient when
// the whole transaction may run again, permanent otherwise.
func runTxOnce(ctx context.Context, db DB, opts pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return classify(err, nil)
	}
	ran := false
	defer func() {
		if !ran { // fn panicked: roll back, release the connection
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	err = fn(ctx, tx)
	ran = true
	if err != nil {
		_ = tx.Rollback(ctx) // a broken connection is closed, not returned to the pool
		return classify(err, tx.Conn())
	}
	err = tx.Commit(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxClosed):
		return rebound.Permanent(&rebound.ArgumentError{Func: "reboundpg.RunTx", Arg: "fn",
			Reason: "must not commit or roll back tx (RunTx found it ended)"})
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return rebound.Permanent(err) // the server rolled back (fn ignored an error)
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return classify(err, nil) // the server answered: not committed
	}
	if pgconn.SafeToRetry(err) {
		return rebound.Transient(err) // COMMIT never left
	}
	return rebound.Permanent(fmt.Errorf("%w: %w", ErrAmbiguousCommit, err))
}

// classify marks an error raised before COMMIT was sent: serialization
// failures, deadlocks and connection failures (nothing was committed)
// are transient, the rest permanent. conn, if not nil, is the
// transaction's connection: closed means it broke.
func classify(err error, conn *pgx.Conn) error {
	if err == nil {
		return nil
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01":
			return rebound.Transient(err)
		case len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code[:2] == "57"):
			return rebound.Transient(err) // connection exception, operator intervention (shutdown)
		}
		return rebound.Permanent(err)
	}
	if pgconn.SafeToRetry(err) || conn != nil && conn.IsClosed() {
		return rebound.Transient(err)
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return rebound.Transient(err)
	}
	return rebound.Permanent(err)
}

// isDuplicateObject reports a CREATE ... IF NOT EXISTS that lost a race
// with a concurrent one (23505 on the catalog, or 42P07).
func isDuplicateObject(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "23505" || pe.Code == "42P07")
}
