package reboundpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/logging"
)

// schemaVersion is the table layout this package reads and writes; it is
// kept in the table's comment.
const schemaVersion = "reboundpg outbox 1"

// Store is a failback outbox on a PostgreSQL table shared by the replicas
// of a service: give Failback to one failback.Invoker. It is safe for
// concurrent use.
type Store struct{ s *store }

// Failback returns the Store as a failback.Store (and failback.Claimer),
// for failback.WithStore.
func (s *Store) Failback() failback.Store { return s.s }

// store is the Store: its failback.Store and failback.Claimer
// methods are for the Invoker, not for users.
type store struct {
	pool   *pgxpool.Pool
	cfg    config
	q      queries
	owner  string // this Store's lease holder token
	notify chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu   sync.Mutex
	held map[int64]struct{} // calls this Store's Invoker holds: their leases are renewed
}

// queries is the SQL of one table, its name quoted once.
type queries struct {
	enqueue, enqueueNotify, insert, update, remove, quarantine, load, claim, next, renew, purge, release, listen string
}

func newQueries(table string, retain bool) queries {
	t := pgx.Identifier{table}.Sanitize()
	live := ` ended IS NULL AND quarantined IS NULL `
	cols := ` t.id, t.method, t.attachments, t.args, t.attempts, (extract(epoch FROM now() - t.born) * 1e6)::bigint, t.format `
	enq := `INSERT INTO ` + t + ` (method, attachments, args) VALUES ($1, $2, $3)`
	q := queries{
		enqueue:       enq,
		enqueueNotify: `WITH i AS (` + enq + ` RETURNING id) SELECT pg_notify($4, '') FROM i`,
		insert: `INSERT INTO ` + t + ` (method, attachments, args, attempts, due, born, owner, locked_until)
			VALUES ($1, $2, $3, $4, now() + $5 * interval '1 microsecond', now() - $6 * interval '1 microsecond', $7,
			now() + $8 * interval '1 microsecond') RETURNING id`,
		update: `UPDATE ` + t + ` SET attempts = $2, due = now() + $3 * interval '1 microsecond',
			locked_until = now() + $5 * interval '1 microsecond' WHERE id = $1 AND owner = $4 AND` + live,
		remove:     `DELETE FROM ` + t + ` WHERE id = $1`,
		quarantine: `UPDATE ` + t + ` SET quarantined = $2, owner = NULL, locked_until = NULL WHERE id = $1`,
		load:       `SELECT` + cols + ` FROM ` + t + ` AS t WHERE` + live + `ORDER BY id`,
		claim: `WITH c AS (SELECT id FROM ` + t + ` WHERE` + live + `AND due <= now()
			AND (locked_until IS NULL OR locked_until <= now()) ORDER BY due, id LIMIT $1 FOR UPDATE SKIP LOCKED)
			UPDATE ` + t + ` AS t SET owner = $2, locked_until = now() + $3 * interval '1 microsecond'
			FROM c WHERE t.id = c.id RETURNING` + cols,
		next: `SELECT (extract(epoch FROM min(greatest(due, coalesce(locked_until, due))) - now()) * 1e6)::bigint
			FROM ` + t + ` WHERE` + live + `AND owner IS DISTINCT FROM $1`,
		renew:   `UPDATE ` + t + ` SET locked_until = now() + $2 * interval '1 microsecond' WHERE owner = $1 AND id = ANY($3) AND` + live,
		purge:   `DELETE FROM ` + t + ` WHERE ended < now() - $1 * interval '1 microsecond'`,
		release: `UPDATE ` + t + ` SET owner = NULL, locked_until = NULL WHERE owner = $1 AND` + live,
		listen:  `LISTEN ` + t,
	}
	if retain {
		q.remove = `UPDATE ` + t + ` SET ended = now(), owner = NULL, locked_until = NULL WHERE id = $1`
	}
	return q
}

// Open creates the table if it does not exist (replicas may open it at
// once) and starts the Store's listener and lease keeper; Close stops
// them. A table of that name of an unknown version is refused.
func Open(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	cfg, err := newConfig("reboundpg.Open", opts)
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, &rebound.ArgumentError{Func: "reboundpg.Open", Arg: "pool", Reason: "must not be nil"}
	}
	if err := createSchema(ctx, pool, cfg.table); err != nil {
		return nil, err
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	s := &store{pool: pool, cfg: cfg, q: newQueries(cfg.table, cfg.retention > 0), owner: hex.EncodeToString(tok[:]), notify: make(chan struct{}, 1), held: map[int64]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.listen()
	go s.keep()
	return &Store{s}, nil
}

// createSchema creates the table and its index under an advisory lock, or
// checks the version of an existing one.
func createSchema(ctx context.Context, pool *pgxpool.Pool, table string) error {
	t := pgx.Identifier{table}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "reboundpg "+t); err != nil {
			return fmt.Errorf("reboundpg: creating table %s: %w", t, err)
		}
		var comment *string
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')`, t).Scan(&exists, &comment); err != nil {
			return fmt.Errorf("reboundpg: checking table %s: %w", t, err)
		}
		switch {
		case exists && comment != nil && *comment == schemaVersion:
			return nil
		case exists:
			got := "no comment"
			if comment != nil {
				got = fmt.Sprintf("comment %q", *comment)
			}
			return fmt.Errorf("reboundpg: table %s exists but is not a %q table (%s): choose another name with WithTable", t, schemaVersion, got)
		}
		_, err := tx.Exec(ctx, `CREATE TABLE `+t+` (
			id bigserial PRIMARY KEY,
			method text NOT NULL,
			attachments bytea NOT NULL,
			args bytea NOT NULL,
			attempts integer NOT NULL DEFAULT 0,
			due timestamptz NOT NULL DEFAULT now(),
			born timestamptz NOT NULL DEFAULT now(),
			owner text,
			locked_until timestamptz,
			ended timestamptz,
			quarantined text,
			format integer NOT NULL DEFAULT 1);
			CREATE INDEX ON `+t+` (due, id) WHERE ended IS NULL AND quarantined IS NULL;
			COMMENT ON TABLE `+t+` IS '`+schemaVersion+`'`)
		if err != nil {
			return fmt.Errorf("reboundpg: creating table %s: %w", t, err)
		}
		return nil
	})
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// storeRetrier paces the Store's own statements through a database
// restart: about 5 s, then the error goes to the Invoker.
var storeRetrier, _ = rebound.NewRetrier(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}, rebound.WithMaxElapsed(5*time.Second))

// exec runs an idempotent statement (one that sets absolute values),
// again after any connection failure.
func (s *store) exec(q string, args ...any) (tag pgconn.CommandTag, err error) {
	err = storeRetrier.Do(s.ctx, func(ctx context.Context) error {
		tag, err = s.pool.Exec(ctx, q, args...)
		if _, ok := errors.AsType[*pgconn.PgError](err); ok || err == nil || ctx.Err() != nil {
			return classify(err, nil)
		}
		return rebound.Transient(err) // the connection failed: running it again is harmless
	})
	return tag, err
}

// Add implements failback.Store: the call is stored leased by this Store.
func (s *store) Add(c failback.StoredCall) (uint64, error) {
	att, err := marshalAttachments(c.Attachments)
	if err != nil {
		return 0, fmt.Errorf("reboundpg: encoding the attachments of %q: %w", c.Method, err)
	}
	now := time.Now()
	var id int64
	err = storeRetrier.Do(s.ctx, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, s.q.insert, c.Method, att, c.Args, c.Attempts,
			micros(c.Due.Sub(now)), micros(now.Sub(c.Born)), s.owner, micros(s.cfg.lease)).Scan(&id)
		return classify(err, nil) // an INSERT is sent again only if it never left
	})
	if err != nil {
		return 0, s.fail("adding a call", err)
	}
	s.hold(id, true)
	return uint64(id), nil
}

// Update implements failback.Store. It returns an error wrapping
// failback.ErrLeaseLost if another Store holds the call now.
func (s *store) Update(id uint64, attempts int, due time.Time) error {
	tag, err := s.exec(s.q.update, int64(id), attempts, micros(time.Until(due)), s.owner, micros(s.cfg.lease))
	if err != nil {
		return s.fail("updating a call", err)
	}
	if tag.RowsAffected() == 0 {
		s.hold(int64(id), false) // handed over: a later claim of it is a fresh one
		return fmt.Errorf("%w: call %d of table %s", failback.ErrLeaseLost, id, s.cfg.table)
	}
	return nil
}

// Remove implements failback.Store: the call is deleted, or marked ended
// under a retention (withRetention, tests only), whoever holds it.
func (s *store) Remove(id uint64) error {
	s.hold(int64(id), false) // even if it fails: the lease ends, another replica retries it
	if _, err := s.exec(s.q.remove, int64(id)); err != nil {
		return s.fail("removing a call", err)
	}
	return nil
}

// Quarantine implements failback.Store: the record stays in the
// table, with the reason in its quarantined column, and is never claimed
// again.
func (s *store) Quarantine(id uint64, reason error) error {
	s.hold(int64(id), false)
	why := strings.ToValidUTF8(strings.ReplaceAll(reason.Error(), "\x00", `\x00`), "\uFFFD") // a text column holds neither
	if _, err := s.exec(s.q.quarantine, int64(id), why); err != nil {
		return s.fail("quarantining a call", err)
	}
	return nil
}

// Load implements failback.Store: it reports every call not ended nor
// quarantined, whoever holds it, and claims nothing. A failback.Invoker
// does not call it (it claims instead); it is there for inspection.
func (s *store) Load(fn func(failback.StoredCall) error) error {
	rows, err := s.pool.Query(s.ctx, s.q.load)
	if err != nil {
		return s.fail("loading calls", err)
	}
	calls, err := s.scan(rows)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// Claim implements failback.Claimer: it leases up to min(n, 64)
// due calls for WithLease, with FOR UPDATE SKIP LOCKED, on the database's
// clock. next is 0 after a full batch, else the time until a call falls
// due or a lease ends, at most WithPollInterval. Calls returned with an
// error are leased and held too. n must be > 0; a closed Store claims
// nothing (ErrClosed).
func (s *store) Claim(ctx context.Context, n int) ([]failback.StoredCall, time.Duration, error) {
	if n < 1 {
		return nil, s.cfg.poll, &rebound.ArgumentError{Func: "reboundpg.Store.Failback().Claim", Arg: "n", Reason: fmt.Sprintf("(%d) must be > 0", n)}
	}
	if s.ctx.Err() != nil { // closed: its leases are released, Update and Remove fail
		return nil, s.cfg.poll, s.fail("claiming calls", s.ctx.Err())
	}
	n = min(n, s.cfg.batch)
	b := &pgx.Batch{}
	b.Queue(s.q.claim, n, s.owner, micros(s.cfg.lease))
	b.Queue(s.q.next, s.owner)
	res := s.pool.SendBatch(ctx, b)
	defer res.Close()
	rows, err := res.Query()
	if err != nil {
		return nil, s.cfg.poll, s.fail("claiming calls", err)
	}
	calls, err := s.scan(rows)
	if err != nil {
		return nil, s.cfg.poll, err
	}
	// A call this Store holds already (its lease ended, its Invoker still
	// has it) is leased again but not handed out twice.
	s.mu.Lock()
	fresh := calls[:0]
	for _, c := range calls {
		if _, ok := s.held[int64(c.ID)]; !ok {
			if c.Err == nil { // an unreadable record is not held: its lease ends unless quarantined
				s.held[int64(c.ID)] = struct{}{}
			}
			fresh = append(fresh, c)
		}
	}
	s.mu.Unlock()
	calls = fresh
	var next *int64
	// From here on, the calls are leased and held: they reach the Invoker
	// even with an error, or the lease renewal would keep them from
	// everyone.
	if err := res.QueryRow().Scan(&next); err != nil {
		return calls, s.cfg.poll, s.fail("claiming calls", err) // when to claim again is unknown
	}
	wait := s.cfg.poll
	switch {
	case len(calls) >= n:
		wait = 0
	case next != nil && *next < micros(wait): // compared in µs: a far due time overflows in ns
		// shadowcheck:allow the polling interval of the claim loop, not a retry delay
		wait = min(wait, max(time.Duration(*next)*time.Microsecond, time.Millisecond))
	}
	if err := res.Close(); err != nil {
		return calls, wait, s.fail("claiming calls", err)
	}
	return calls, wait, nil
}

// Notify implements failback.Claimer: it receives on a NOTIFY of the
// table's channel (Enqueue sends one at commit) and after the listener
// (re)connects.
func (s *store) Notify() <-chan struct{} { return s.notify }

// Release implements failback.Claimer: the Store stops renewing the
// call's lease, which ends within about WithLease; any Store claims it
// then.
func (s *store) Release(id uint64) { s.hold(int64(id), false) }

// scan reads rows of the cols columns; a record that cannot be decoded
// comes back with Err set.
func (s *store) scan(rows pgx.Rows) ([]failback.StoredCall, error) {
	defer rows.Close()
	var calls []failback.StoredCall
	now := time.Now()
	for rows.Next() {
		var (
			id, age      int64
			method       string
			att, args    []byte
			attempts, fm int32
		)
		if err := rows.Scan(&id, &method, &att, &args, &attempts, &age, &fm); err != nil {
			return nil, s.fail("reading calls", err)
		}
		c := failback.StoredCall{ID: uint64(id), Method: method, Args: args, Attempts: int(attempts),
			Due: now, Born: now.Add(-time.Duration(age) * time.Microsecond)}
		if fm != 1 {
			c.Err = fmt.Errorf("%w: table %s, id %d: record format %d (this version reads 1)", failback.ErrBadRecord, s.cfg.table, id, fm)
		} else if err := json.Unmarshal(att, &c.Attachments); err != nil {
			c.Err = fmt.Errorf("%w: table %s, id %d: attachments: %w", failback.ErrBadRecord, s.cfg.table, id, err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("reading calls", err)
	}
	return calls, nil
}

// Enqueue adds inv to the shared queue in the caller's transaction tx, so
// that the call exists exactly when tx commits, due at once. It returns the
// call's IdempotencyKey (inv's own, or a new one). WithCodec's Codec
// encodes the arguments; attachments must be valid UTF-8.
func (s *Store) Enqueue(ctx context.Context, tx pgx.Tx, inv *cluster.Invocation) (key string, err error) {
	return s.s.enqueue(ctx, tx, inv)
}

func (s *store) enqueue(ctx context.Context, tx pgx.Tx, inv *cluster.Invocation) (key string, err error) {
	if tx == nil || inv == nil {
		return "", &rebound.ArgumentError{Func: "reboundpg.Store.Enqueue", Arg: "tx and inv", Reason: "must not be nil"}
	}
	args, err := s.cfg.codec.Marshal(inv.Method, inv.Args)
	if err != nil {
		return "", fmt.Errorf("reboundpg: Enqueue: encoding the arguments of %q: %w", inv.Method, err)
	}
	att := make(map[string]string, len(inv.Attachments)+1)
	maps.Copy(att, inv.Attachments)
	if att[failback.IdempotencyKey] == "" {
		att[failback.IdempotencyKey] = rand.Text()
	}
	ab, err := marshalAttachments(att)
	if err != nil {
		return "", fmt.Errorf("reboundpg: Enqueue: encoding the attachments of %q: %w", inv.Method, err)
	}
	if s.cfg.quiet {
		_, err = tx.Exec(ctx, s.q.enqueue, inv.Method, ab, args)
	} else {
		_, err = tx.Exec(ctx, s.q.enqueueNotify, inv.Method, ab, args, s.cfg.table)
	}
	if err != nil {
		return "", s.fail("enqueueing a call", err)
	}
	return att[failback.IdempotencyKey], nil
}

// marshalAttachments encodes att as JSON, which holds UTF-8 only: a key or
// value that is not is refused, not stored altered.
func marshalAttachments(att map[string]string) ([]byte, error) {
	for k, v := range att {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("attachment %q is not valid UTF-8 (the table keeps attachments as JSON)", k)
		}
	}
	return json.Marshal(att)
}

// fail wraps err with what the Store was doing and its table.
func (s *store) fail(doing string, err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("reboundpg: %s (table %s): %w: %w", doing, s.cfg.table, rebound.ErrClosed, err)
	}
	return fmt.Errorf("reboundpg: %s (table %s): %w", doing, s.cfg.table, err)
}

// Close stops the Store's goroutines and releases its leases (bounded by
// 5 s), so other replicas claim its calls at once. Call it after the
// Invoker's Close or Shutdown. It is idempotent; the pool stays open.
func (s *Store) Close() error { return s.s.close() }

func (s *store) close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, e := s.pool.Exec(ctx, s.q.release, s.owner); e != nil {
			err = fmt.Errorf("reboundpg: Close: releasing leases (table %s; they end within WithLease): %w", s.cfg.table, e)
		}
	})
	return err
}

// hold adds id to the calls whose leases the keeper renews, or removes it.
func (s *store) hold(id int64, on bool) {
	s.mu.Lock()
	if on {
		s.held[id] = struct{}{}
	} else {
		delete(s.held, id)
	}
	s.mu.Unlock()
}

// wake tells the Invoker to claim now.
func (s *store) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// listenPolicy paces the listener's reconnects.
var listenPolicy = rebound.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// listen keeps a LISTEN connection until Close; each Retry ends when a
// connection that worked breaks, so the backoff starts afresh.
func (s *store) listen() {
	defer s.wg.Done()
	obs := logging.NewLoop(s.cfg.log, "reboundpg", zap.String("loop", "listen"), zap.String("table", s.cfg.table))
	for s.ctx.Err() == nil {
		_ = rebound.Retry(s.ctx, listenPolicy, s.listenOnce, rebound.WithObserver(obs))
	}
}

// listenOnce listens on one connection until it breaks: nil if LISTEN
// worked (a fresh start), else the error, marked transient.
func (s *store) listenOnce(ctx context.Context) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return rebound.Transient(err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, s.q.listen); err != nil {
		return rebound.Transient(err)
	}
	s.wake() // calls may have come while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			s.cfg.log.Debug("reboundpg: listener connection ended", zap.Error(err))
			return nil
		}
		s.wake()
	}
}

// keep renews this Store's leases and purges ended calls until Close. A
// failing renewal logs one Warn, then Debug, and one Info once it works.
func (s *store) keep() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.lease/3, time.Millisecond))
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		ids := make([]int64, 0, len(s.held))
		for id := range s.held {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		_, err := s.pool.Exec(s.ctx, s.q.renew, s.owner, micros(s.cfg.lease), ids)
		switch {
		case s.ctx.Err() != nil: // closing: nothing to say
		case err != nil && !failing:
			s.cfg.log.Warn("reboundpg: renewing leases failed (they end within the lease unless renewed)", zap.String("table", s.cfg.table), zap.Error(err))
		case err != nil:
			s.cfg.log.Debug("reboundpg: renewing leases failed again", zap.String("table", s.cfg.table), zap.Error(err))
		case failing:
			s.cfg.log.Info("reboundpg: renewing leases again", zap.String("table", s.cfg.table))
		}
		failing = err != nil
		if s.cfg.retention > 0 {
			_, _ = s.pool.Exec(s.ctx, s.q.purge, micros(s.cfg.retention))
		}
	}
}
