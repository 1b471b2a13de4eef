package reboundpg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
)

// A call a loses to b (a paused past its lease, b claimed it, a's Update
// saw ErrLeaseLost and its Invoker dropped it) is claimed by a again once
// b lets it go: a must hand it out, not keep it leased and renewed with
// nobody delivering it.
func TestLeaseLostCallClaimedAgain(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	a := openStore(t, pool, reboundpg.WithTable(table))
	b, err := reboundpg.Open(context.Background(), pool, reboundpg.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	enqueue(t, pool, a, 1, false)
	ctx := context.Background()
	calls, _, err := a.Claim(ctx, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("a.Claim: %d calls, %v", len(calls), err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET locked_until = now() - interval '1 second', owner = 'paused'`, table)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Claim(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("b.Claim after a's lease ended: %v, %v", got, err)
	}
	if err := a.Update(calls[0].ID, 1, calls[0].Due); !errors.Is(err, failback.ErrLeaseLost) {
		t.Fatalf("a.Update: %v, want ErrLeaseLost", err)
	}
	if err := b.Close(); err != nil { // releases b's lease: the call is free
		t.Fatal(err)
	}
	got, _, err := a.Claim(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != calls[0].ID {
		t.Fatalf("a.Claim of the call b released: %v, %v; want call %d handed out (rows: %d leased to a, nobody delivers them)",
			got, err, calls[0].ID, count(t, pool, table, "owner IS NOT NULL"))
	}
}

// A record this version cannot read (format 2) is handed out with Err set;
// without WithQuarantine the Invoker only logs it, and failback says it
// "is claimed again when its lease ends": the Store must not hold it (and
// renew its lease, and filter it out of its own claims) for ever.
func TestBadRecordLeaseEnds(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	a := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, a, 1, false)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET format = 2`, table)); err != nil {
		t.Fatal(err)
	}
	calls, _, err := a.Claim(ctx, 10)
	if err != nil || len(calls) != 1 || !errors.Is(calls[0].Err, failback.ErrBadRecord) {
		t.Fatalf("a.Claim: %v, %v; want one call with ErrBadRecord", calls, err)
	}
	// Its lease ends (on the database's clock).
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %q SET locked_until = now() - interval '1 second'`, table)); err != nil {
		t.Fatal(err)
	}
	got, _, err := a.Claim(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != calls[0].ID {
		t.Fatalf("a.Claim after the bad record's lease ended: %v, %v; want it handed out again (rows leased: %d)",
			got, err, count(t, pool, table, "locked_until > now()"))
	}
}

// A quarantine reason PostgreSQL's text cannot hold (a codec error that
// quotes the raw payload: a NUL byte, invalid UTF-8) still quarantines the
// call, else it is claimed and fails to quarantine again every lease.
func TestQuarantineReasonNotText(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	a := openStore(t, pool, reboundpg.WithTable(table))
	enqueue(t, pool, a, 1, false)
	calls, _, err := a.Claim(context.Background(), 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("a.Claim: %v, %v", calls, err)
	}
	if err := a.Quarantine(calls[0].ID, errors.New("cannot decode \x00\xff payload")); err != nil {
		t.Fatalf("Quarantine with a reason holding NUL and invalid UTF-8: %v", err)
	}
	if n := count(t, pool, table, "quarantined IS NOT NULL"); n != 1 {
		t.Fatalf("%d calls quarantined, want 1", n)
	}
}

// refusingCodec is the JSON codec of a replica that cannot decode any
// call's arguments (an older version that lacks their types, say).
type refusingCodec struct{ failback.Codec }

func (refusingCodec) Unmarshal(method string, _ []byte) ([]any, error) {
	return nil, fmt.Errorf("no types for %q in this version", method)
}

// A call whose arguments the Invoker's Codec cannot decode, without
// WithQuarantine, is logged at Error and left for its lease to end: its
// Store stops renewing the lease, so the call is claimed again when it
// ends, by the same Invoker (which logs it again) or by a replica whose
// Codec decodes it and delivers it. It is never run by the first one.
func TestUndecodableCallLeaseEnds(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	opts := []reboundpg.Option{reboundpg.WithTable(table), reboundpg.WithLease(200 * time.Millisecond),
		reboundpg.WithPollInterval(50 * time.Millisecond)}
	a := openStore(t, pool, opts...)
	keys := enqueue(t, pool, a, 1, false)
	core, logs := observer.New(zapcore.ErrorLevel)
	pa := newProvider(nil)
	newInvoker(t, a, pa, failback.WithStore(a.Failback(), refusingCodec{failback.JSONCodec(nil)}),
		failback.WithLogger(zap.New(core)))
	reported := func() int {
		return logs.FilterMessageSnippet("cannot be loaded").Len()
	}
	waitFor(t, "the undecodable call reported twice (claimed again after its lease ended)", func() bool { return reported() >= 2 })
	b := openStore(t, pool, opts...)
	pb := newProvider(nil)
	newInvoker(t, b, pb)
	waitFor(t, "the call delivered by the replica that decodes it", func() bool {
		pb.mu.Lock()
		defer pb.mu.Unlock()
		return pb.seen[keys[0]] == 1
	})
	pa.mu.Lock()
	tries := pa.tries
	pa.mu.Unlock()
	if tries != 0 {
		t.Errorf("the replica that cannot decode the call made %d attempts, want 0", tries)
	}
}
