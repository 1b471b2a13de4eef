package etcd

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// connWatchers holds, per client, the one goroutine that tells the
// client's Registrations when its connection becomes ready again.
var connWatchers = struct {
	mu sync.Mutex
	m  map[*clientv3.Client]*connWatcher
}{m: map[*clientv3.Client]*connWatcher{}}

// connWatcher is a client's connection watcher and the ready channels of
// its Registrations (capacity 1: a pending wake-up is enough).
type connWatcher struct {
	regs   map[chan struct{}]struct{} // under connWatchers.mu
	cancel context.CancelFunc
	done   chan struct{}
}

// watchReady starts sending on ready whenever client's connection becomes
// ready after it was not; the returned function stops that, and the
// client's watcher with its last Registration, waiting for it.
func watchReady(client *clientv3.Client, ready chan struct{}) (stop func()) {
	connWatchers.mu.Lock()
	w := connWatchers.m[client]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &connWatcher{regs: map[chan struct{}]struct{}{}, cancel: cancel, done: make(chan struct{})}
		connWatchers.m[client] = w
		go w.run(ctx, client)
	}
	w.regs[ready] = struct{}{}
	connWatchers.mu.Unlock()
	return func() {
		connWatchers.mu.Lock()
		delete(w.regs, ready)
		last := len(w.regs) == 0
		if last {
			delete(connWatchers.m, client)
		}
		connWatchers.mu.Unlock()
		if last {
			w.cancel()
			<-w.done
		}
	}
}

// run watches the client's connection state until ctx is done.
func (w *connWatcher) run(ctx context.Context, client *clientv3.Client) {
	defer close(w.done)
	conn := client.ActiveConnection()
	if conn == nil {
		return
	}
	s := conn.GetState()
	for conn.WaitForStateChange(ctx, s) {
		was := s
		s = conn.GetState()
		if s == connectivity.Ready && was != connectivity.Ready {
			w.broadcast()
		}
	}
}

func (w *connWatcher) broadcast() {
	connWatchers.mu.Lock()
	defer connWatchers.mu.Unlock()
	for ready := range w.regs {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
}
