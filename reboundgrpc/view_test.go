package reboundgrpc_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
)

// TestUnresolvedPushed: the registry's error reaches a ClientConn with no
// list as soon as it changes (the view pushes it), not at the next step of
// a polling interval; WithUnresolvedReport still holds the first report
// back until d after Build.
func TestUnresolvedPushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t)
		errA, errB := errors.New("registry says A"), errors.New("registry says B")
		fail := errA
		reg.SetFailure(func(subscriber.Key) error { return fail })
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		if _, errs := f.snapshot(); len(errs) != 0 {
			t.Fatalf("errors %v before WithUnresolvedReport (1 s)", errs)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if _, errs := f.snapshot(); len(errs) != 1 || !errors.Is(errs[0], reboundgrpc.ErrUnresolved) || !errors.Is(errs[0], errA) {
			t.Fatalf("errors %v at 1.1 s, want one ErrUnresolved with A", errs)
		}
		reg.SetFailure(func(subscriber.Key) error { return errB })
		time.Sleep(time.Second) // the next attempts (backoff at most 500 ms) fail with B
		synctest.Wait()
		_, errs := f.snapshot()
		t.Logf("reports by 2.1 s: %v", errs)
		if len(errs) < 2 || !errors.Is(errs[len(errs)-1], errB) {
			t.Fatalf("errors %v at 2.1 s, want B reported once the registry answered it", errs)
		}
	})
}

// TestBuilderSharesTheManagersView: a ClientConn's resolver and another
// reader of the same key over the same Manager share one registry
// subscription; the Builder's Close lets go of its share only.
func TestBuilderSharesTheManagersView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, m, b := memEnvWith(t, nil, reboundgrpc.WithLinger(0))
		reg.Set(orders, inst(1))
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, err := views.Watch(orders)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if states, _ := f.snapshot(); len(states) != 1 || states[0] != 1 {
			t.Fatalf("states %v, want [1]", states)
		}
		if s := reg.Stats(); s.Subscribes != 1 || s.Active != 1 {
			t.Fatalf("registry %+v, want one subscription for both readers", s)
		}
		r.Close()
		_ = b.Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 || !v.Snapshot().HasList {
			t.Fatalf("registry %+v after the Builder's Close, want the other reader's subscription kept", s)
		}
	})
}
