package dedupegrpc_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
	"github.com/rebound-go/rebound/reboundpg/dedupegrpc"
	"github.com/rebound-go/rebound/reboundpg/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Three deliveries of one call (at-least-once) apply its change once; a
// handler error rolls the key back; a call without a key has no tx.
func TestInterceptor(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Shared(t).DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := reboundpg.NewDedupe(ctx, pool, "applied")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS counter (n int); INSERT INTO counter VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	icpt := dedupegrpc.UnaryServerInterceptor(pool, d)
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/Notify"}
	var dups int
	fail := errors.New("handler failed")
	handler := func(failing bool) grpc.UnaryHandler {
		return func(ctx context.Context, _ any) (any, error) {
			tx, dup := dedupegrpc.Tx(ctx)
			if dup {
				dups++
				return "ok", nil
			}
			if _, err := tx.Exec(ctx, `UPDATE counter SET n = n + 1`); err != nil {
				return nil, err
			}
			if failing {
				return nil, fail
			}
			return "ok", nil
		}
	}
	call := metadata.NewIncomingContext(ctx, metadata.Pairs(failback.IdempotencyKey, rand.Text()))
	if _, err := icpt(call, nil, info, handler(true)); !errors.Is(err, fail) {
		t.Fatalf("failing handler: %v", err)
	}
	for range 3 {
		if _, err := icpt(call, nil, info, handler(false)); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT n FROM counter`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || dups != 2 {
		t.Errorf("counter %d, duplicates %d: want 1 and 2", n, dups)
	}
	_, err = icpt(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
		if tx, _ := dedupegrpc.Tx(ctx); tx != nil {
			t.Error("a call without a key got a transaction")
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A key Dedupe refuses (too long: a forged or broken sender) is answered
// InvalidArgument, not Unavailable, which tells the sender to retry it
// for ever; the handler does not run.
func TestInterceptorRefusedKey(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Shared(t).DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := reboundpg.NewDedupe(ctx, pool, "applied_refused")
	if err != nil {
		t.Fatal(err)
	}
	icpt := dedupegrpc.UnaryServerInterceptor(pool, d)
	call := metadata.NewIncomingContext(ctx, metadata.Pairs(failback.IdempotencyKey, strings.Repeat("k", 4096)))
	_, err = icpt(call, nil, &grpc.UnaryServerInfo{FullMethod: "/svc/Notify"}, func(context.Context, any) (any, error) {
		t.Error("the handler ran for a refused key")
		return nil, nil
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a 4 KiB key: %v; want InvalidArgument", err)
	}
}
