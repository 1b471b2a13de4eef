package reboundpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebound-go/rebound/reboundpg"
)

// Release of an id this Store never claimed, or of one released already,
// changes nothing; a released call claimed again by the same Store (its
// lease ended) has its lease renewed again; Release after Close does not
// panic.
func TestReleaseThenClaimedAgain(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	table := tableName(t)
	s := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(3*time.Second))
	enqueue(t, pool, s, 1, false)
	calls, _, err := s.Claim(ctx, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("claimed %d calls (%v), want 1", len(calls), err)
	}
	id := calls[0].ID
	s.Release(id + 1000)
	s.Release(id)
	s.Release(id)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET locked_until = now() - interval '1 second'`, table)); err != nil {
		t.Fatal(err)
	}
	again, _, err := s.Claim(ctx, 10)
	if err != nil || len(again) != 1 || again[0].ID != id {
		t.Fatalf("claimed %v (%v) after the lease ended, want call %d", again, err, id)
	}
	// Its lease renewed again: pushed past what is left of it now.
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET locked_until = now() + interval '1 second'`, table)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease of the call claimed again renewed", func() bool {
		return count(t, pool, table, "locked_until > now() + interval '2 seconds'") == 1
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Release(id)
}
