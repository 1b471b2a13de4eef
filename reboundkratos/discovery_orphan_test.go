package reboundkratos_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/reboundkratos"
)

// TestCloseStopsWatchersOfAStoppedSubscription: a subscription that
// stopped for good (here: the Manager closed first) is replaced by the
// next Watch or GetService of its name; Close must still stop the
// watchers of the old one (their Next returns ErrWatcherStopped), as its
// doc says of every watcher.
func TestCloseStopsWatchersOfAStoppedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"))
		w, err := st.d.Watch(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatal(err)
		}
		if got := recv(t, nextAsync(w)); got != "[9001]" {
			t.Fatalf("first Next = %s, want [9001]", got)
		}
		_ = st.m.Close()
		synctest.Wait()
		if _, err := st.d.Watch(context.Background(), "orders.grpc"); err == nil {
			t.Fatal("Watch over a closed Manager: nil error")
		}
		ch := nextAsync(w)
		_ = st.d.Close()
		time.Sleep(time.Second)
		if got := recv(t, ch); got != "error: "+reboundkratos.ErrWatcherStopped.Error() {
			t.Fatalf("Next after Discovery.Close = %s, want ErrWatcherStopped", got)
		}
		_, err = w.Next()
		if !errors.Is(err, reboundkratos.ErrWatcherStopped) {
			t.Fatalf("Next = %v", err)
		}
		if s := reboundkratos.ViewStats(st.d); s.Subscribes != s.Unsubscribes {
			t.Fatalf("after Close: %d Subscribes, %d Unsubscribes (the stopped subscription was never released)", s.Subscribes, s.Unsubscribes)
		}
	})
}

// TestGetServiceAfterSubscriptionStopped: GetService answers from memory,
// but once the name's subscription stopped for good (here: the Manager
// closed) it returns an error, as its doc says, not the last list as if
// it were current.
func TestGetServiceAfterSubscriptionStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"))
		l, err := st.d.GetService(context.Background(), "orders.grpc")
		if err != nil || len(l) != 1 {
			t.Fatalf("GetService = %v, %v", l, err)
		}
		_ = st.m.Close()
		synctest.Wait()
		l, err = st.d.GetService(context.Background(), "orders.grpc")
		if err == nil {
			t.Fatalf("GetService after the subscription stopped for good = %d instances, nil error; want an error", len(l))
		}
	})
}
