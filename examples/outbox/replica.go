package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
	"github.com/rebound-go/rebound/reboundpg"
)

// httpInvoker sends a call to the provider with its idempotency key.
type httpInvoker struct{ url, replica string }

func (h httpInvoker) Target() string { return h.url }

func (h httpInvoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(fmt.Sprint(inv.Args...)))
	if err != nil {
		return nil, err
	}
	req.Header.Set(failback.IdempotencyKey, inv.Attachments[failback.IdempotencyKey])
	req.Header.Set("X-Replica", h.replica)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, rebound.Transient(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, rebound.Transient(fmt.Errorf("provider: %s", resp.Status))
	}
	return nil, nil
}

// replicaPolicy retries quickly, for a short demo.
var replicaPolicy = rebound.Policy{Initial: 200 * time.Millisecond, Max: time.Second}

// runReplica queues calls replica's way (pg: Enqueue in a business
// transaction; bolt: Invoke, queued in its own file when the first attempt
// fails), says READY, and retries until it is killed.
func runReplica(id, mode, dsn, provider, dir string, calls int, lease time.Duration) error {
	ctx := context.Background()
	dirv := cluster.NewStaticDirectory(httpInvoker{url: provider, replica: id})
	opts := []failback.Option{failback.WithPolicy(replicaPolicy), failback.WithMaxTasks(100000)}
	if mode == "bolt" {
		st, err := boltstore.Open(filepath.Join(dir, "replica-"+id+".db"))
		if err != nil {
			return err
		}
		defer st.Close()
		fb, err := failback.New(dirv, append(opts, failback.WithStore(st, nil))...)
		if err != nil {
			return err
		}
		defer fb.Close()
		for i := range calls {
			if _, err := fb.Invoke(ctx, &cluster.Invocation{Method: "Ship", Args: []any{id, i}}); err != nil {
				return err
			}
		}
		return ready()
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := reboundpg.Open(ctx, pool, reboundpg.WithTable("outbox"), reboundpg.WithLease(lease))
	if err != nil {
		return err
	}
	defer st.Close()
	fb, err := failback.New(dirv, append(opts, failback.WithStore(st.Failback(), nil))...)
	if err != nil {
		return err
	}
	defer fb.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, replica text)`); err != nil {
		return err
	}
	for i := range calls {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (replica) VALUES ($1)`, id); err != nil {
			return err
		}
		if _, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Ship", Args: []any{id, i}}); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return ready()
}

// ready tells the parent, then waits to be killed (bounded, in case the
// parent died).
func ready() error {
	fmt.Println("READY")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	<-ctx.Done()
	return nil
}
