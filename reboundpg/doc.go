// Package reboundpg puts rebound on PostgreSQL (pgx v5): a failback
// outbox that the replicas of a service share, calls enqueued in the
// caller's own transaction, transactions retried as one unit, and
// receiver-side deduplication. It is a module of its own, so rebound's core
// never compiles a database driver.
//
// # The outbox
//
//	st, err := reboundpg.Open(ctx, pool, reboundpg.WithTable("outbox"))
//	defer st.Close()                                   // after fb's Close
//	fb, err := failback.New(dir, failback.WithStore(st.Failback(), nil)) // one Invoker per Store
//
//	tx, _ := pool.Begin(ctx)
//	... the business change ...
//	key, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Notify", Args: args})
//	err = tx.Commit(ctx) // the call exists exactly when the change does
//
// Each replica's Invoker claims due calls in batches (FOR UPDATE SKIP
// LOCKED) with a lease on the database's clock, and runs them under
// failback's rules. A dead replica's calls move on when its lease ends. A
// commit wakes the replicas through LISTEN/NOTIFY; a claim every second is
// the fallback. A record that cannot be decoded is quarantined in the
// table under failback.WithQuarantine; without it, its lease is not renewed
// and any replica claims it again when the lease ends. Open creates the
// table; docs/postgres.md has its SQL, the faults and the measurements.
//
// # Transactions and deduplication
//
// RunTx retries a transaction as a unit on serialization failures,
// deadlocks and broken connections. Dedupe records idempotency keys in the
// receiver's transaction; package dedupegrpc puts it in a gRPC server
// interceptor.
package reboundpg
