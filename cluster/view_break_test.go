package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func viewInst(port uint64) subscriber.Instance {
	return subscriber.Instance{ID: fmt.Sprint(port), IP: "10.0.0.1", Port: port, Weight: 1, Healthy: true, Enabled: true}
}

// TestWithViewFilterPanicRecovered: a WithFilter function that panics on
// a list the view shows does not kill the process (as a Listener, the
// Manager recovers it; WithView's goroutine did not): the directory keeps
// its last list and applies the next one.
func TestWithViewFilterPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := subscriber.Key{Service: "orders"}
		reg := subscribertest.New()
		reg.Set(key, viewInst(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, err := views.Watch(key)
		if err != nil {
			t.Fatal(err)
		}
		keep := func(in subscriber.Instance) bool {
			if in.Port == 666 {
				panic("filter bug")
			}
			return true
		}
		d, err := cluster.NewRegistryDirectory(dialAddr, cluster.WithView(v), cluster.WithFilter(keep))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		synctest.Wait()
		reg.Set(key, viewInst(1), viewInst(666))
		synctest.Wait()
		if got := targets(t, d); got != "10.0.0.1:1 " {
			t.Fatalf("after the filter panicked: %q, want the last list kept", got)
		}
		reg.Set(key, viewInst(2))
		synctest.Wait()
		if got := targets(t, d); got != "10.0.0.1:2 " {
			t.Fatalf("after the next list: %q, want it applied", got)
		}
	})
}

// TestWithViewCloseDuringDial: Close while the directory's goroutine
// dials (slowly) a list the view showed waits for that Update, closes
// the view (the registry holds nothing) and leaves no goroutine; lists
// that came during the dial coalesce to the latest.
func TestWithViewCloseDuringDial(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		key := subscriber.Key{Service: "orders"}
		reg := subscribertest.New()
		reg.Set(key, viewInst(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := views.Watch(key)
		var dials atomic.Int32
		slow := func(in subscriber.Instance) (cluster.Invoker, error) {
			dials.Add(1)
			time.Sleep(time.Second)
			return dialAddr(in)
		}
		d, err := cluster.NewRegistryDirectory(slow, cluster.WithView(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		for p := uint64(2); p <= 10; p++ {
			reg.Set(key, viewInst(p))
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // the dial of [2] and then of the latest, [10]
		synctest.Wait()
		if got := targets(t, d); got != "10.0.0.1:10 " {
			t.Fatalf("after the lists: %q, want the latest", got)
		}
		if n := dials.Load(); n > 3 {
			t.Fatalf("%d dials for 10 lists while dialing took 1 s, want them coalesced", n)
		}
		reg.Set(key, viewInst(11))
		time.Sleep(500 * time.Millisecond) // mid-dial
		_ = d.Close()
		_ = d.Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 {
			t.Fatalf("registry %+v after Close, want the view closed", s)
		}
		if _, err := d.List(context.Background(), nil); err == nil {
			t.Fatal("List after Close succeeded")
		}
	})
}

// TestWithViewCloseFromErrorHandler: a WithErrorHandler function that
// closes the directory (called on WithView's goroutine, during an
// Update) does not deadlock: Close returns, and the view is closed once
// the goroutine ends. Close waited for that goroutine, which waited for
// Close.
func TestWithViewCloseFromErrorHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := subscriber.Key{Service: "orders"}
		reg := subscribertest.New()
		reg.Set(key, viewInst(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := views.Watch(key)
		dial := func(in subscriber.Instance) (cluster.Invoker, error) {
			if in.Port == 666 {
				return nil, fmt.Errorf("refused")
			}
			return dialAddr(in)
		}
		var d *cluster.RegistryDirectory
		var closed atomic.Bool
		onErr := func(error) {
			_ = d.Close()
			closed.Store(true)
		}
		d, err = cluster.NewRegistryDirectory(dial, cluster.WithView(v), cluster.WithErrorHandler(onErr))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		reg.Set(key, viewInst(1), viewInst(666))
		synctest.Wait()
		if !closed.Load() {
			t.Fatal("Close called from the error handler did not return")
		}
		if s := reg.Stats(); s.Active != 0 {
			t.Fatalf("registry %+v after Close, want the view closed", s)
		}
	})
}
