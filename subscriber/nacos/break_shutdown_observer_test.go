package nacos_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// TestBreakShutdownFromEngineObserverInShutdown: the engine calls the
// observers of WithPolicy in Shutdown's deregistration too, on
// Shutdown's goroutine. A Shutdown called there waited for the first one
// to end, which waited for the observer: neither returned. Correct: it
// returns at once an error matching rebound.ErrCalledFromCallback, and
// the first Shutdown returns nil. The scenario runs in a process of its
// own: while the defect lasts, it leaves goroutines that never end.
func TestBreakShutdownFromEngineObserverInShutdown(t *testing.T) {
	if !inChildProcess(t) {
		return
	}
	srv := newServer(t)
	c := newClient(t, srv)
	var reg atomic.Pointer[subscriber.Registration]
	var shutting atomic.Bool
	var once sync.Once
	inner := make(chan error, 1)
	obs := rebound.ObserverFunc(func(e rebound.Event) {
		g := reg.Load()
		if e.Kind != rebound.EventAttempt || e.Detail != nil || g == nil || !shutting.Load() {
			return // the engine's events of Shutdown's requests only
		}
		once.Do(func() { inner <- (*g).Shutdown(context.Background()) })
	})
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		append(fastRegisterWith(rebound.WithObserver(obs)), nacos.WithCheckInterval(0))...)
	if err != nil {
		t.Fatal(err)
	}
	reg.Store(&g)
	shutting.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	select {
	case err := <-inner:
		if !errors.Is(err, rebound.ErrCalledFromCallback) {
			t.Fatalf("Shutdown from the observer = %v, want an error matching rebound.ErrCalledFromCallback", err)
		}
	default:
		t.Fatal("the engine's observer was not called in Shutdown's requests")
	}
	if listed(srv, "orders", "10.0.0.1", 8080) {
		t.Fatal("the server still lists the instance after Shutdown")
	}
}
