package failback

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// nilLB is a broken LoadBalance that selects nothing without an error.
type nilLB struct{}

func (nilLB) Select([]cluster.Invoker, *cluster.Invocation, []cluster.Invoker) (cluster.Invoker, error) {
	return nil, nil
}

func TestEdgeCases(t *testing.T) {
	t.Run("retry-after beyond MaxElapsed gives up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
				if c.first {
					return nil, errRefused
				}
				return nil, rebound.RetryAfter(time.Hour, errRefused)
			})
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()),
				WithPolicy(rebound.Policy{}, rebound.WithMaxElapsed(time.Minute)))
			defer mustClose(t, f)
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{})
			time.Sleep(time.Hour)
			synctest.Wait()
			g := rec.get("gaveup")
			if len(g) != 1 || !errors.Is(g[0].Err, rebound.ErrExhausted) || !strings.Contains(g[0].Err.Error(), "retry after 1h") {
				t.Fatalf("gave up %+v; want rebound.ErrExhausted naming the Retry-After", g)
			}
		})
	})
	t.Run("nil selection counts as no invokers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", nil)), WithLoadBalance(nilLB{}), retries(1))
			defer mustClose(t, f)
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
				t.Fatalf("Invoke = %v; want queued", err)
			}
			time.Sleep(time.Hour)
			synctest.Wait()
			if s := f.Stats(); s.GaveUp != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	})
	t.Run("closed while queueing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := newRecorder()
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", nil)), withObserver(rec.hooks()))
			mustClose(t, f)
			// The first attempt failed just before Close; queueing it finds the invoker closed.
			err := f.firstFailure(callerCtx(), &cluster.Invocation{Method: "late"}, nil, errRefused)
			var rej *rejectedError
			if !errors.As(err, &rej) || rej.Reason != ErrClosed || !errors.Is(err, ErrClosed) || !errors.Is(err, errRefused) {
				t.Fatalf("firstFailure after Close = %v; want a rejectedError (closed) wrapping the error", err)
			}
			s := f.Stats()
			checkStats(t, s)
			if s.Offered != 1 || s.Dropped[ErrClosed] != 1 || rec.dropped[ErrClosed] != 1 {
				t.Errorf("stats %+v, hooks %v", s, rec.dropped)
			}
		})
	})
	t.Run("nil classifier means the default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errors.New("business")))), WithRetryable(nil))
			defer mustClose(t, f)
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err == nil || !strings.HasPrefix(err.Error(), "business (failback: not retried") {
				t.Errorf("Invoke = %v; want the business error at once, not retried", err)
			}
		})
	})
}
