package reboundpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundpg"
)

// A panic in RunTx's fn rolls the transaction back and releases its
// connection before it goes on up.
func TestRunTxPanicReleasesConnection(t *testing.T) {
	pool := newPool(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("after a panic in fn: %d connections still acquired from the pool (the tx was never rolled back)", n)
	}
}

// fn that commits or rolls back tx itself breaks RunTx's rule: the error
// says so, and is not ErrAmbiguousCommit (nothing about COMMIT's outcome
// is unknown).
func TestRunTxFnEndsTx(t *testing.T) {
	pool := newPool(t)
	for _, end := range []string{"commit", "rollback"} {
		err := reboundpg.RunTx(context.Background(), pool, pgx.TxOptions{}, nil, func(ctx context.Context, tx pgx.Tx) error {
			if end == "commit" {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		})
		if errors.Is(err, reboundpg.ErrAmbiguousCommit) || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("fn that calls %s: %v; want an argument error naming fn's rule, not ErrAmbiguousCommit", end, err)
		}
	}
}
