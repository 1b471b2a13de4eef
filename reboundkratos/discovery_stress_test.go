package reboundkratos_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/rebound-go/rebound/reboundkratos"
)

// TestWatchStopStorm: many watchers of one name, started and stopped in
// random order from many goroutines while the list changes, share the
// subscription; when all are stopped none is left, and every Subscribe
// has its Unsubscribe after Close.
func TestWatchStopStorm(t *testing.T) {
	st := newMemStack(t, reboundkratos.FormatNacos)
	st.reg.Set(orders, nacosInst(9001, "v1"))
	var wg sync.WaitGroup
	stopChange := make(chan struct{})
	var cw sync.WaitGroup
	cw.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopChange:
				return
			default:
			}
			st.reg.Set(orders, nacosInst(9000+i%50, "v1"))
		}
	})
	for range 16 {
		wg.Go(func() {
			for range 50 {
				w, err := st.d.Watch(context.Background(), "orders.grpc")
				if err != nil {
					t.Error(err)
					return
				}
				if rand.IntN(2) == 0 {
					if _, err := w.Next(); err != nil {
						t.Errorf("first Next: %v", err)
					}
				}
				_ = w.Stop()
				if rand.IntN(3) == 0 {
					_ = w.Stop()
				}
				if _, err := w.Next(); err == nil {
					t.Error("Next after Stop: nil error")
				}
			}
		})
	}
	wg.Wait()
	close(stopChange)
	cw.Wait()
	if s, n := reboundkratos.ViewStats(st.d), reboundkratos.Watchers(st.d); n != 0 || s.Keys != 0 {
		t.Fatalf("after every Stop: %+v, %d watchers, want no watcher and no subscription", s, n)
	}
	_ = st.d.Close()
	if s := reboundkratos.ViewStats(st.d); s.Subscribes != s.Unsubscribes {
		t.Fatalf("after Close: %d Subscribes, %d Unsubscribes", s.Subscribes, s.Unsubscribes)
	}
}
