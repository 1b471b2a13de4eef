package main

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// connLog records when an etcd client's gRPC connection becomes Ready, so
// the table can show the client's own reconnect pacing apart from the
// resolver's part of the time to see a provider.
type connLog struct {
	mu     sync.Mutex
	ready  []time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func watchConn(c *clientv3.Client) *connLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &connLog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		conn := c.ActiveConnection()
		st := conn.GetState()
		for {
			if !conn.WaitForStateChange(ctx, st) {
				return
			}
			st = conn.GetState()
			if st == connectivity.Ready {
				l.mu.Lock()
				l.ready = append(l.ready, time.Now())
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// readyAfter is the first time at or after t the connection became Ready.
func (l *connLog) readyAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ready {
		if !r.Before(t) {
			return r, true
		}
	}
	return time.Time{}, false
}

func (l *connLog) stop() {
	l.cancel()
	<-l.done
}
