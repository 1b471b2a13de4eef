// Package dedupegrpc is a gRPC server interceptor that makes calls
// carrying an idempotency key (failback.IdempotencyKey, sent as metadata
// by reboundgrpc with a failback Store) effectively-once on a receiver
// that keeps its state in PostgreSQL: the key is recorded with
// reboundpg.Dedupe in a transaction the handler makes its change in, and
// a call whose key was applied already reaches the handler marked as a
// duplicate.
//
//	d, _ := reboundpg.NewDedupe(ctx, pool, "applied_calls")
//	srv := grpc.NewServer(grpc.UnaryInterceptor(dedupegrpc.UnaryServerInterceptor(pool, d)))
//
//	func (s *server) Notify(ctx context.Context, req *pb.Req) (*pb.Resp, error) {
//		tx, dup := dedupegrpc.Tx(ctx)
//		if dup {
//			return &pb.Resp{}, nil // applied already: answer as the first time
//		}
//		_, err := tx.Exec(ctx, ...) // or the pool, for a call without a key (tx == nil)
//		...
//	}
package dedupegrpc

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
)

type txKey struct{}

type txVal struct {
	tx  pgx.Tx
	dup bool
}

// Tx returns the transaction of a call that carries an idempotency key
// (nil for one without) and whether the key was applied already. The
// interceptor commits tx when the handler returns no error and rolls it
// back otherwise (the key is then not recorded: a retry applies again);
// the handler must not commit or roll it back.
func Tx(ctx context.Context) (tx pgx.Tx, duplicate bool) {
	v, _ := ctx.Value(txKey{}).(*txVal)
	if v == nil {
		return nil, false
	}
	return v.tx, v.dup
}

// UnaryServerInterceptor records the idempotency key of each unary call
// with d in a transaction begun on db (see Tx). A call without a key goes
// straight to the handler. A database failure before the handler runs, or
// at commit, is answered with codes.Unavailable, so that the sender
// retries (the key decides whether that retry applies).
func UnaryServerInterceptor(db reboundpg.DB, d *reboundpg.Dedupe) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		keys := md.Get(failback.IdempotencyKey)
		if len(keys) == 0 || keys[0] == "" {
			return handler(ctx, req)
		}
		tx, err := db.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "dedupegrpc: %s: begin: %v", info.FullMethod, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		first, err := d.Apply(ctx, tx, keys[0])
		if errors.Is(err, rebound.ErrInvalidArgument) {
			return nil, status.Errorf(codes.InvalidArgument, "dedupegrpc: %s: %v", info.FullMethod, err)
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "dedupegrpc: %s: %v", info.FullMethod, err)
		}
		resp, err := handler(context.WithValue(ctx, txKey{}, &txVal{tx: tx, dup: !first}), req)
		if err != nil {
			return resp, err
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, status.Errorf(codes.Unavailable, "dedupegrpc: %s: commit: %v", info.FullMethod, err)
		}
		return resp, nil
	}
}
