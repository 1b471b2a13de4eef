package nacos

import (
	"context"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
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

// startMonitor runs h's monitor until the returned func stops it.
func startMonitor(h *hub) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go h.monitor(ctx, done)
	return func() { cancel(); <-done }
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
		defer startMonitor(h)()
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

// addrClient is a healthClient with static server addresses.
type addrClient struct {
	healthClient
	servers []constant.ServerConfig
}

func (c *addrClient) GetServerConfig() ([]constant.ServerConfig, error) { return c.servers, nil }

// TestReachableProbesTheGRPCPort: while disconnected the monitor asks
// ServerHealthy (HTTP requests in the SDK) only once a server accepts a
// TCP connection on its gRPC port (GrpcPort, else Port + 1000); a client
// without addresses is always asked.
func TestReachableProbesTheGRPCPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := uint64(l.Addr().(*net.TCPAddr).Port)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shut := uint64(closed.Addr().(*net.TCPAddr).Port)
	_ = closed.Close()
	defer l.Close()
	for _, tc := range []struct {
		name    string
		client  naming_client.INamingClient
		reached bool
	}{
		{"no addresses", &healthClient{}, true},
		{"closed gRPC port", &addrClient{servers: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: 1, GrpcPort: shut}}}, false},
		{"open gRPC port", &addrClient{servers: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: 1, GrpcPort: shut}, {IpAddr: "127.0.0.1", Port: 1, GrpcPort: open}}}, true},
		{"open at Port + 1000", &addrClient{servers: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: open - 1000}}}, true},
	} {
		if got := (&hub{client: tc.client}).reachable(context.Background()); got != tc.reached {
			t.Errorf("%s: reachable = %v, want %v", tc.name, got, tc.reached)
		}
	}
	// The monitor of a disconnected client whose server refuses never
	// calls ServerHealthy after the call that saw the disconnection (its
	// later calls 1, 3, 7 and 11 s after it are dialled and refused).
	synctest.Test(t, func(t *testing.T) {
		c := &addrClient{servers: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: 1, GrpcPort: shut}}}
		c.up.Store(true)
		h := &hub{client: c, slots: map[string]*registration{}}
		defer startMonitor(h)()
		synctest.Wait() // its first call, connected
		c.up.Store(false)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !h.conn.down.Load() {
			t.Fatal("the monitor did not see the disconnection at its next call")
		}
		n := c.calls.Load()
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := c.calls.Load() - n; got != 0 {
			t.Fatalf("%d ServerHealthy calls in 15 s while the server refuses, want 0", got)
		}
	})
}

// TestReachableBehindAProxy: a server the SDK's gRPC connection reaches
// through a proxy (HTTPS_PROXY, which net/http reads once per process:
// hence a child process) is not dialled: reachable cannot tell, and the
// monitor asks ServerHealthy as before.
func TestReachableBehindAProxy(t *testing.T) {
	if os.Getenv("REBOUND_TEST_PROXY_CHILD") == "1" {
		// 10.255.255.1 is not dialled: a dial would fail after the probe's
		// timeout.
		c := &addrClient{servers: []constant.ServerConfig{{IpAddr: "10.255.255.1", Port: 8848}}}
		if !(&hub{client: c}).reachable(context.Background()) {
			t.Fatal("reachable = false behind a proxy, want true (cannot tell)")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReachableBehindAProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REBOUND_TEST_PROXY_CHILD=1", "HTTPS_PROXY=http://127.0.0.1:9", "https_proxy=", "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
