package rebound_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

// The same hand-built Permanent with a nil error, in the blocking form: Do
// calls op again at once, over and over, with no time passing (a
// busy-spin), and MaxAttempts does not bound it (the permanent rule
// returns before the MaxAttempts rule).
func TestDoPermanentNilBusySpins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := bk3Retrier(t, rebound.Policy{}, rebound.WithMaxAttempts(3))
		calls := 0
		start := time.Now()
		_ = r.Do(t.Context(), func(context.Context) error {
			calls++
			if calls > 100 { // end the spin this test would otherwise be
				return rebound.Permanent(errBk3)
			}
			return &backoff.PermanentError{}
		})
		if calls > 1 {
			t.Fatalf("Do (MaxAttempts 3) called op %d times in %v of (virtual) time for a Permanent error; want 1", calls, time.Since(start))
		}
	})
}
