package failback

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// A first attempt marked Stopping is stored only when the policy allows a
// retry: with MaxAttempts 1 Invoke returns the error unchanged and stores
// nothing (the documented table said "queued and stored" without the
// condition).
func TestStoppingWithoutRetriesIsNotStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing := errors.New("grpc: the client connection is closing")
		p := newProvider("a:1", func(context.Context, call) (any, error) { return nil, Stopping(closing) })
		st := newMemStore()
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(1)))
		_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
		mustClose(t, f)
		calls, _ := st.snapshot()
		if s := f.Stats(); !isStopping(err) || !errors.Is(err, closing) || len(calls) != 0 || s.Offered != 0 {
			t.Fatalf("Invoke = %v, %d stored, %+v; want the error unchanged, nothing stored or offered", err, len(calls), s)
		}
	})
}
