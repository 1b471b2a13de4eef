package subscriber

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"unsafe"
)

// downRegistry fails every Subscribe with a transient error.
type downRegistry struct{}

func (downRegistry) Subscribe(context.Context, Key, Sink) error   { return errors.New("unreachable") }
func (downRegistry) Unsubscribe(context.Context, Key, Sink) error { return nil }

// TestPendingSubscriptionHoldsLittle: a Subscription fits the 640-byte
// size class (it was 720 bytes, in the 768 class), and a pending one of a
// Manager without a logger holds no retry Loop, no Ready or Done channel
// nobody asked for, and no other scheduler entries than its retry timer
// (BenchmarkMemoryPerSubscription has the bytes).
func TestPendingSubscriptionHoldsLittle(t *testing.T) {
	if n := unsafe.Sizeof(Subscription{}); n > 640 {
		t.Errorf("a Subscription is %d bytes, want at most 640 (a size class; 704 and 768 are the next)", n)
	}
	synctest.Test(t, func(t *testing.T) {
		m, err := New(downRegistry{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.Subscribe(context.Background(), Key{Service: "svc"}, func([]Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first attempt failed: retrying
		s.mu.Lock()
		st, log, ready, done, aux := s.state, s.log, s.ready, s.done, s.aux
		s.mu.Unlock()
		if st != StateRetrying {
			t.Fatalf("state %v, want retrying", st)
		}
		if log != nil || ready != nil || done != nil || aux != nil {
			t.Errorf("a pending subscription holds: Loop %v, ready %v, done %v, aux %v; want none", log != nil, ready != nil, done != nil, aux != nil)
		}
		// Asked for afterwards, the channels behave as before.
		select {
		case <-s.Ready():
			t.Error("Ready closed before an acknowledgement")
		case <-s.Done():
			t.Error("Done closed while running")
		default:
		}
		if err := s.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		default:
			t.Error("Done open after Unsubscribe")
		}
	})
}
