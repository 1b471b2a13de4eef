// Package reboundpg puts rebound on PostgreSQL (pgx v5): a failback
// outbox that the replicas of a service share, calls enqueued in the
// caller's own transaction, transactions retried as one unit on the
// engine, and receiver-side deduplication. It is a module of its own, so
// rebound's core never compiles a database driver.
//
// # The outbox
//
//	st, err := reboundpg.Open(ctx, pool, reboundpg.WithTable("outbox"))
//	defer st.Close()                                   // after fb's Close
//	fb, err := failback.New(dir, failback.WithStore(st)) // one Store per Invoker
//
//	tx, _ := pool.Begin(ctx)
//	... the business change ...
//	key, err := st.Enqueue(ctx, tx, &cluster.Invocation{Method: "Notify", Args: args})
//	err = tx.Commit(ctx) // the call exists exactly when the change does
//
// Store is a failback.Store and a failback.Claimer: instead of loading
// every call once, each replica's Invoker claims due calls in batches
// (FOR UPDATE SKIP LOCKED) with a lease (locked_until, WithLease) and runs
// them under failback's rules (policy, budget, breaker, TTL, quarantine,
// idempotency keys, at-least-once). Leases and due times are kept on the
// database's clock (now()): replicas send durations, never their own
// time, so a replica whose clock is off neither steals nor strands calls.
// A Store renews the leases of the calls its Invoker holds; a replica that
// dies (or loses the database for longer than a lease) leaves its calls to
// the next claim after the lease ends. A committed Enqueue wakes the
// replicas through LISTEN/NOTIFY at once; a claim every WithPollInterval
// is the fallback. A call that ended is deleted (or kept, marked, for
// WithRetention). The calls that failed a first attempt in Invoke are
// stored too (Add), leased by the replica that holds them.
//
// Faults: a statement that fails on a broken connection is run again for
// up to about 5 s on the engine (Update, Remove and Quarantine always,
// being idempotent; Add only if nothing was sent), then the error goes to
// the Invoker, which handles it as for any Store: Invoke returns an error
// wrapping failback.ErrStore for a call it could not store, a failed Update or Remove is logged (the call may run again:
// at-least-once). A record that cannot be decoded (an unknown format, bad
// attachments, arguments the Codec refuses) is quarantined with
// failback.WithQuarantine: it stays in the table with the reason in its
// quarantined column and is never claimed again.
//
// # The table
//
// Open creates it if it does not exist, under an advisory lock, and
// marks it with a version in its comment ("reboundpg outbox 1"); it
// refuses a table of that name that is not a version it knows. Its name
// (WithTable) is always quoted as an identifier. docs/postgres.md has the
// SQL, for those who create their tables by migration.
//
// # Transactions
//
// RunTx runs a function in a transaction and retries the whole unit on
// serialization failures, deadlocks and connections that broke before
// COMMIT was sent, with rebound's backoff, jitter, budgets and ctx; a
// COMMIT sent without an answer ends it with ErrAmbiguousCommit.
//
// # Deduplication
//
// Dedupe records idempotency keys in the receiver's own transaction;
// package dedupegrpc puts it in a gRPC server interceptor.
package reboundpg
