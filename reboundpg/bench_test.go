package reboundpg_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
	"github.com/rebound-go/rebound/reboundpg"
)

// fsyncOn turns fsync on for the server (pgtest starts it off) until the
// end of b, so that commits cost what they cost in production.
func fsyncOn(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	set := func(q string) {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			b.Fatal(err)
		}
	}
	set(`ALTER SYSTEM SET fsync = on`)
	b.Cleanup(func() { set(`ALTER SYSTEM RESET fsync`) })
}

// parallel runs op b.N times on callers goroutines.
func parallel(b *testing.B, callers int, op func(i int) error) {
	var wg sync.WaitGroup
	per := b.N / callers
	for g := range callers {
		n := per
		if g < b.N%callers {
			n++
		}
		wg.Go(func() {
			for i := range n {
				if err := op(g*per + i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkEnqueue measures a business transaction (one INSERT, COMMIT,
// fsync on) alone ("tx"), with a call enqueued in it ("tx+enqueue"; with
// WithNotify(false): "tx+enqueue-nonotify"), and
// followed by the same call stored in a bbolt file ("tx+bbolt", fsync on:
// not atomic with the transaction), at 1, 16 and 128 concurrent callers.
// The added cost per call is the difference of ns/op with "tx".
func BenchmarkEnqueue(b *testing.B) {
	pool := newPool(b)
	fsyncOn(b, pool)
	ctx := context.Background()
	orders := createTable(b, pool, `CREATE TABLE %s (id bigserial PRIMARY KEY, item text)`)
	ins := `INSERT INTO ` + pgx.Identifier{orders}.Sanitize() + ` (item) VALUES ($1)`
	outbox := tableName(b)
	st := openStore(b, pool, reboundpg.WithTable(outbox))
	quiet := openStore(b, pool, reboundpg.WithTable(outbox), reboundpg.WithNotify(false))
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "calls.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer bolt.Close()
	codec := failback.JSONCodec(nil)
	for _, callers := range []int{1, 16, 128} {
		for _, mode := range []string{"tx", "tx+enqueue", "tx+enqueue-nonotify", "tx+bbolt"} {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, mode), func(b *testing.B) {
				b.ReportAllocs()
				parallel(b, callers, func(i int) error {
					inv := &cluster.Invocation{Method: "Notify", Args: []any{"order", i}}
					tx, err := pool.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(ctx)
					if _, err := tx.Exec(ctx, ins, "book"); err != nil {
						return err
					}
					if mode == "tx+enqueue" {
						if _, err := st.Enqueue(ctx, tx, inv); err != nil {
							return err
						}
					}
					if mode == "tx+enqueue-nonotify" {
						if _, err := quiet.Enqueue(ctx, tx, inv); err != nil {
							return err
						}
					}
					if err := tx.Commit(ctx); err != nil {
						return err
					}
					if mode == "tx+bbolt" {
						args, err := codec.Marshal(inv.Method, inv.Args)
						if err != nil {
							return err
						}
						now := time.Now()
						_, err = bolt.Add(failback.StoredCall{Method: inv.Method, Args: args, Due: now, Born: now,
							Attachments: map[string]string{failback.IdempotencyKey: rand.Text()}})
						return err
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkDeliveryLatency measures the time from the commit of an
// enqueued call to its delivery by one of 3 replicas, woken by NOTIFY, and
// with the NOTIFY left out (a plain INSERT) so that only polling finds the
// call (WithPollInterval 250ms and the default 1s); p50 and p99 are
// reported.
func BenchmarkDeliveryLatency(b *testing.B) {
	for _, mode := range []struct {
		name   string
		notify bool
		poll   time.Duration
	}{{"notify", true, time.Second}, {"poll=250ms", false, 250 * time.Millisecond}, {"poll=1s", false, time.Second}} {
		b.Run(mode.name, func(b *testing.B) {
			pool := newPool(b)
			table := tableName(b)
			got := make(chan time.Time, 1)
			p := newProvider(func(context.Context, *cluster.Invocation) error {
				got <- time.Now()
				return nil
			})
			var st *reboundpg.Store
			for range 3 {
				st = openStore(b, pool, reboundpg.WithTable(table), reboundpg.WithPollInterval(mode.poll))
				newInvoker(b, st, p)
			}
			ctx := context.Background()
			raw := `INSERT INTO ` + pgx.Identifier{table}.Sanitize() + ` (method, attachments, args) VALUES ('Notify', '{}', '[]')`
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for range b.N {
				tx, err := pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if mode.notify {
					_, err = st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Notify"})
				} else {
					_, err = tx.Exec(ctx, raw)
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				lat = append(lat, (<-got).Sub(committed))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkTransfers runs 16 goroutines moving money between 10 accounts
// under SERIALIZABLE with RunTx and with the hand-written loop, and
// reports the runs of a transfer's body per committed transfer.
func BenchmarkTransfers(b *testing.B) {
	for _, mode := range []string{"RunTx", "hand-written"} {
		b.Run(mode, func(b *testing.B) {
			pool := newPool(b)
			run := engineRun(pool)
			if mode != "RunTx" {
				run = handLoop(pool)
			}
			each := max(1, b.N/16)
			b.ReportAllocs()
			runs := transfers(b, pool, 16, each, run)
			b.ReportMetric(float64(runs)/float64(16*each), "runs/transfer")
		})
	}
}
