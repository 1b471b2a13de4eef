package reboundpg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundpg"
)

// A key too long for the table's unique index (a sender's bug or a forged
// key) is refused as an argument, naming the limit, not as a database
// failure that a gRPC sender would be told to retry (Unavailable).
func TestDedupeHugeKey(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	d, err := reboundpg.NewDedupe(ctx, pool, tableName(t))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8<<10)
	_, _ = rand.Read(b)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := d.Apply(ctx, tx, hex.EncodeToString(b)); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("Apply with a 16 KiB key: %v; want an argument error", err)
	}
	if first, err := d.Apply(ctx, tx, "k"); err != nil || !first {
		t.Fatalf("Apply after a refused key: %v, %v; want the tx still usable", first, err)
	}
}
