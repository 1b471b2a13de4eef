package reboundpg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/reboundpg"
)

// Lease renewals that keep failing (the table renamed away) log one Warn
// when they start failing, each further failure at Debug, and one Info
// when they work again: not a Warn every third of a lease.
func TestRenewalFailuresLoggedOnce(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	core, logs := observer.New(zapcore.DebugLevel)
	st := openStore(t, pool, reboundpg.WithTable(table), reboundpg.WithLease(30*time.Millisecond), reboundpg.WithLogger(zap.New(core)))
	enqueue(t, pool, st, 1, false)
	if calls, _, err := st.Claim(context.Background(), 1); err != nil || len(calls) != 1 {
		t.Fatalf("Claim: %v, %v", calls, err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %q RENAME TO %q`, table, table+"_away")); err != nil {
		t.Fatal(err)
	}
	renewals := func(lvl zapcore.Level) int {
		n := 0
		for _, e := range logs.All() {
			if e.Level == lvl && strings.Contains(e.Message, "renewing leases") {
				n++
			}
		}
		return n
	}
	waitFor(t, "five failed renewals", func() bool { return renewals(zapcore.WarnLevel)+renewals(zapcore.DebugLevel) >= 5 })
	if n := renewals(zapcore.WarnLevel); n != 1 {
		t.Fatalf("%d Warn lines for one outage of the lease keeper, want 1", n)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %q RENAME TO %q`, table+"_away", table)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "renewals working again", func() bool { return renewals(zapcore.InfoLevel) >= 1 })
	if n := renewals(zapcore.WarnLevel); n != 1 {
		t.Errorf("%d Warn lines for one outage of the lease keeper, want 1", n)
	}
	if n := renewals(zapcore.InfoLevel); n != 1 {
		t.Errorf("%d Info lines for one recovery, want 1", n)
	}
}
