package reboundpg_test

import (
	"context"
	"testing"

	"github.com/rebound-go/rebound/reboundpg"
)

// A key applied in a committed transaction is a duplicate afterwards; one
// whose transaction rolled back is not.
func TestDedupe(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	d, err := reboundpg.NewDedupe(ctx, pool, tableName(t))
	if err != nil {
		t.Fatal(err)
	}
	apply := func(key string, commit bool) bool {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		first, err := d.Apply(ctx, tx, key)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return first
	}
	if !apply("k1", true) || apply("k1", true) {
		t.Error("k1: want first, then duplicate")
	}
	if !apply("k2", false) || !apply("k2", true) || apply("k2", true) {
		t.Error("k2: a rolled-back apply must not count")
	}
	if _, err := reboundpg.NewDedupe(ctx, pool, ""); err == nil {
		t.Error("NewDedupe accepted an empty name")
	}
}
