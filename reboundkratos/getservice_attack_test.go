package reboundkratos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/reboundkratos"
)

// TestGetServiceFailedCallKeepsSubscription: a GetService that fails
// (its ctx was cancelled already, or ended before a first list while the
// registry is down) lets go of the name's subscription it took. Before,
// each such call kept it until Close: with the registry down, the Manager
// retried Subscribe for every failed name (a mistyped one, one that
// vanished) for the life of the Discovery.
func TestGetServiceFailedCallKeepsSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.SetDown(true)
		// A ctx cancelled already.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := st.d.GetService(ctx, "cancelled-caller"); !errors.Is(err, context.Canceled) {
			t.Fatalf("GetService with a cancelled ctx: %v, want Canceled", err)
		}
		const n = 20
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := st.d.GetService(ctx, fmt.Sprintf("typo-%d", i))
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("GetService with the registry down: %v, want DeadlineExceeded", err)
			}
		}
		synctest.Wait()
		before := st.reg.Stats().Subscribes
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		retries := st.reg.Stats().Subscribes - before
		if s := reboundkratos.ViewStats(st.d); s.Keys != 0 {
			t.Errorf("after %d GetService calls that all failed, the Discovery holds %d subscriptions (%+v) "+
				"and the registry saw %d Subscribe attempts for them in 10 minutes; want none held",
				n+1, s.Keys, s, retries)
		}
	})
}

// TestGetServiceFailedCallKeepsWaitersSubscription: a GetService that
// fails while another call of the same name still waits lets go of
// nothing: the waiting call gets the list when it comes, and the name
// stays subscribed after it.
func TestGetServiceFailedCallKeepsWaitersSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.SetDown(true)
		waiting := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l, err := st.d.GetService(ctx, "orders.grpc")
			if err == nil && len(l) != 1 {
				err = fmt.Errorf("%d instances, want 1", len(l))
			}
			waiting <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := st.d.GetService(ctx, "orders.grpc")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GetService with the registry down: %v, want DeadlineExceeded", err)
		}
		st.reg.Set(orders, nacosInst(9001, "v1"))
		st.reg.SetDown(false)
		if err := <-waiting; err != nil {
			t.Fatalf("the waiting GetService, after the other one failed: %v", err)
		}
		synctest.Wait()
		if s := reboundkratos.ViewStats(st.d); s.Keys != 1 {
			t.Fatalf("after a GetService returned a list: %+v, want the name held", s)
		}
	})
}
