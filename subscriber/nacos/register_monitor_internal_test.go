package nacos

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
)

// healthClient is a client whose ServerHealthy is set by the test and
// counts its calls; its other methods are not called.
type healthClient struct {
	naming_client.INamingClient
	up    atomic.Bool
	calls atomic.Int64
}

func (c *healthClient) ServerHealthy() bool {
	c.calls.Add(1)
	return c.up.Load()
}

// TestHubMonitorBacksOffWhileDown: while the client is disconnected the
// registrations' monitor calls ServerHealthy (HTTP requests in the SDK)
// 1 s after the disconnection, then at intervals doubling to 4 s; it
// sees a reconnect at its next call, and polls every 100 ms again once
// connected (a later disconnection starts again at 1 s).
func TestHubMonitorBacksOffWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &healthClient{}
		c.up.Store(true)
		h := &hub{client: c, slots: map[string]*registration{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go h.monitor(ctx, done)
		defer func() { cancel(); <-done }()
		synctest.Wait() // its first call, at the start
		calls := func(d time.Duration) int64 {
			t.Helper()
			n := c.calls.Load()
			time.Sleep(d)
			synctest.Wait()
			return c.calls.Load() - n
		}
		if n := calls(time.Second); n != 10 {
			t.Fatalf("connected: %d calls in 1 s, want 10 (every 100 ms)", n)
		}
		c.up.Store(false)
		if n := calls(100 * time.Millisecond); n != 1 {
			t.Fatalf("%d calls in the 100 ms that see the disconnection, want 1", n)
		}
		// Down since the call above: calls 1, 3, 7, 11 and 15 s after it.
		for _, w := range []struct {
			d    time.Duration
			want int64
		}{{time.Second, 1}, {2 * time.Second, 1}, {4 * time.Second, 1}, {4 * time.Second, 1}, {4 * time.Second, 1}, {3999 * time.Millisecond, 0}} {
			if n := calls(w.d); n != w.want {
				t.Fatalf("disconnected: %d calls in the next %v, want %d", n, w.d, w.want)
			}
		}
		c.up.Store(true) // 1 ms before the next call: seen by it
		if n := calls(time.Millisecond); n != 1 {
			t.Fatalf("%d calls in the 1 ms up to the next one, want 1", n)
		}
		if n := calls(time.Second); n != 10 {
			t.Fatalf("connected again: %d calls in 1 s, want 10 (every 100 ms)", n)
		}
		c.up.Store(false)
		if n := calls(100*time.Millisecond) + calls(time.Second); n != 2 {
			t.Fatalf("disconnected again: %d calls in 1.1 s, want 2 (the one that sees it, then 1 s later)", n)
		}
	})
}
