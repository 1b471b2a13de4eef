package reboundpg

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rebound-go/rebound"
)

// Dedupe records the idempotency keys of the calls a receiver applied, in
// a table of its own, in the transaction of each call's change. With
// at-least-once delivery, the change so happens once. Rows are never
// deleted: delete old ones yourself. A Dedupe is safe for concurrent use.
type Dedupe struct{ insert string }

// NewDedupe creates table if it does not exist (quoted as an identifier)
// and returns a Dedupe on it.
func NewDedupe(ctx context.Context, db DB, table string) (*Dedupe, error) {
	if db == nil || table == "" || len(table) > 63 || strings.ContainsRune(table, 0) {
		return nil, &rebound.ArgumentError{Func: "reboundpg.NewDedupe", Arg: "db and table",
			Reason: fmt.Sprintf("must be a DB and a name of 1 to 63 bytes with no NUL (got %q)", table)}
	}
	t := pgx.Identifier{table}.Sanitize()
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (key text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	if err != nil && !isDuplicateObject(err) {
		return nil, fmt.Errorf("reboundpg: NewDedupe: creating table %s: %w", t, err)
	}
	return &Dedupe{insert: `INSERT INTO ` + t + ` (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`}, nil
}

// maxKey is the longest key Apply takes.
const maxKey = 1024

// Apply records key in tx and reports whether it is new; false means the
// call was applied already. A concurrent transaction holding the same new
// key makes Apply wait for its outcome. An empty key, or one over 1,024
// bytes, is a *rebound.ArgumentError.
func (d *Dedupe) Apply(ctx context.Context, tx pgx.Tx, key string) (first bool, err error) {
	if key == "" || tx == nil || len(key) > maxKey {
		return false, &rebound.ArgumentError{Func: "reboundpg.Dedupe.Apply", Arg: "tx and key",
			Reason: fmt.Sprintf("must not be nil, and the key 1 to %d bytes (got %d: a unique index entry is at most about 2.7 KB)", maxKey, len(key))}
	}
	tag, err := tx.Exec(ctx, d.insert, key)
	if err != nil {
		return false, fmt.Errorf("reboundpg: Dedupe.Apply: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
