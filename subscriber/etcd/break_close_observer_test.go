package etcd_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakCloseFromObserver: a Registration's observer can close it. It
// used to be unable to close it: observers run on the Registration's goroutine, and Close waits
// for that goroutine to end, so Close never returns and the Registration
// never stops. Correct: Close called from an observer returns without
// waiting for the goroutine it is called from (as subscriber's and
// failback's Close do), and the Registration then stops.
func TestBreakCloseFromObserver(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	var reg atomic.Pointer[etcdreg.Registration]
	entered, returned := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var closeErr error // written before returned is closed
	obs := rebound.WithObserver(registrationHooks{StateChanged: func(e regStateChange) {
		g := reg.Load()
		if e.To != subscriber.RegistrationRepairing || g == nil {
			return
		}
		once.Do(func() {
			close(entered)
			closeErr = g.Close()
			close(returned)
		})
	}})
	g, err := etcdreg.RegisterConcrete(context.Background(), cli, orders, inst("10.0.0.1", 80), fastRegisterWith(obs)...)
	if err != nil {
		t.Fatal(err)
	}
	reg.Store(g)
	t.Cleanup(func() {
		select {
		case <-returned:
			_ = g.Shutdown(context.Background())
		default: // Shutdown would wait for the goroutine that never ends
		}
	})
	if _, err := cli.Delete(context.Background(), g.InstanceKey()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the observer to see repairing", func() bool {
		select {
		case <-entered:
			return true
		default:
			return false
		}
	})
	eventually(t, "Close called from the observer to return", func() bool {
		select {
		case <-returned:
			return true
		default:
			return false
		}
	})
	if !errors.Is(closeErr, rebound.ErrCalledFromCallback) {
		t.Fatalf("Close from the observer = %v, want an error matching rebound.ErrCalledFromCallback", closeErr)
	}
	eventually(t, "the Registration to stop", func() bool {
		return g.Status().State == subscriber.RegistrationStopped
	})
}
