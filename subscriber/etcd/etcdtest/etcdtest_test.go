package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Peer connections between members end up to 5 s after the
		// members stop (see the package documentation): retry that long.
		if err := subscribertest.FindLeaks(15 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const timeout = 20 * time.Second

func newClient(t *testing.T, c *etcdtest.Cluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	cfg := c.ClientConfig()
	if len(endpoints) > 0 {
		cfg.Endpoints = endpoints
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// do runs op until it succeeds (writes in flight during an election fail
// with "request timed out", as in production), each try bounded.
func do(t *testing.T, what string, op func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := op(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		<-tick.C
	}
}

func get(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	var v string
	do(t, "get "+key, func(ctx context.Context) error {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return err
		}
		v = ""
		if len(resp.Kvs) == 1 {
			v = string(resp.Kvs[0].Value)
		}
		return nil
	})
	return v
}

func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	do(t, "put "+key, func(ctx context.Context) error {
		_, err := cli.Put(ctx, key, value)
		return err
	})
}

func waitReady(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClusterLifecycle(t *testing.T) {
	c, err := etcdtest.NewCluster(3, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if c.Size() != 3 || len(c.Endpoints()) != 3 {
		t.Fatalf("Size %d, Endpoints %v", c.Size(), c.Endpoints())
	}
	leader := c.Leader()
	if leader < 0 {
		t.Fatal("no leader after NewCluster")
	}
	cli := newClient(t, c)
	put(t, cli, "k", "v1")

	// The leader crashes: another member takes over, the data is there.
	c.StopMember(leader)
	if c.Running(leader) || c.Etcd(leader) != nil {
		t.Fatal("a stopped member still runs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	next, err := c.WaitLeader(ctx)
	if err != nil || next == leader {
		t.Fatalf("WaitLeader = %d, %v; want another member than %d", next, err, leader)
	}
	put(t, cli, "k", "v2")

	// A client of the stopped member only cannot connect: the crash drops
	// connections and refuses new ones.
	only := newClient(t, c, c.Endpoint(leader))
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = only.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("a stopped member answered")
	}
	if err := c.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.StartMember(leader); err == nil {
		t.Fatal("StartMember of a running member succeeded")
	}
	waitReady(t, c)
	if got := get(t, only, "k"); got != "v2" {
		t.Fatalf("restarted member serves %q, want v2 (it caught up)", got)
	}

	// A full restart keeps the data; a wipe does not.
	c.Stop()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	if got := get(t, cli, "k"); got != "v2" {
		t.Fatalf("after a restart k = %q, want v2", got)
	}
	if err := c.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	if got := get(t, cli, "k"); got != "" {
		t.Fatalf("after a wipe k = %q, want nothing", got)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); !errors.Is(err, etcdtest.ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
	if err := c.StartMember(0); !errors.Is(err, etcdtest.ErrClosed) {
		t.Fatalf("StartMember after Close = %v, want ErrClosed", err)
	}
	if err := c.Wipe(); !errors.Is(err, etcdtest.ErrClosed) {
		t.Fatalf("Wipe after Close = %v, want ErrClosed", err)
	}
}

func TestStatsAndHookCountRejectedRequests(t *testing.T) {
	var hooked [3]int
	c, err := etcdtest.NewCluster(3, etcdtest.WithDir(t.TempDir()), etcdtest.WithRequestHook(func(r etcdtest.Request) {
		if r.Name == etcdtest.RequestRange {
			hooked[r.Member]++ // from the member's goroutines; read after they stopped
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	survivor := (c.Leader() + 1) % 3
	cli := newClient(t, c, c.Endpoint(survivor))
	put(t, cli, "k", "v")
	wctx, wcancel := context.WithCancel(context.Background())
	wch := cli.Watch(wctx, "k", clientv3.WithCreatedNotify())
	<-wch
	wcancel()
	c.ResetStats()
	get(t, cli, "k")

	// Without a quorum the member loses its leader and rejects reads
	// that require one; they are counted all the same.
	for i := range 3 {
		if i != survivor {
			c.StopMember(i)
		}
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.Etcd(survivor).Server.Leader() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lone member still has a leader")
		}
		<-tick.C
	}
	// A client that does not retry: clientv3's default (100 retries of
	// an Unavailable error, 25 ms apart, on top of each call's own
	// latency) can outlast the deadline on a busy machine.
	cfg := c.ClientConfig()
	cfg.Endpoints = []string{c.Endpoint(survivor)}
	cfg.MaxUnaryRetries = 1
	once, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = once.Get(clientv3.WithRequireLeader(rctx), "k")
	rcancel()
	if !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Fatalf("read without quorum = %v, want ErrNoLeader", err)
	}

	st := c.Stats()
	if st.Requests[etcdtest.RequestRange] < 2 {
		t.Fatalf("Stats = %v, want at least the 2 reads since the reset", st.Requests)
	}
	if st.Requests[etcdtest.RequestPut] != 0 {
		t.Fatalf("Stats = %v, want no Put since the reset", st.Requests)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if hooked[survivor] < 2 {
		t.Fatalf("the hook saw %d reads on member %d, want at least 2", hooked[survivor], survivor)
	}
}

func TestNewClusterRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		size int
		opts []etcdtest.Option
	}{
		{0, nil},
		{1, []etcdtest.Option{etcdtest.WithDir("")}},
		{1, []etcdtest.Option{etcdtest.WithElection(0, time.Second)}},
		{1, []etcdtest.Option{etcdtest.WithElection(100*time.Millisecond, 200*time.Millisecond)}},
		{1, []etcdtest.Option{etcdtest.WithStartTimeout(0)}},
	} {
		c, err := etcdtest.NewCluster(tc.size, tc.opts...)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("NewCluster(%d, %v) = %v, want an ArgumentError", tc.size, tc.opts, err)
		}
	}
}

// TestBlackholeMember: a blackholed member's clients get no answer (the
// connection stays open: no error but their own deadline); after
// HealMember they reconnect and are served.
func TestBlackholeMember(t *testing.T) {
	c, err := etcdtest.NewCluster(1, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cli := newClient(t, c)
	put(t, cli, "k", "v")
	c.BlackholeMember(0)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = cli.Get(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Get through a blackholed member = %v, want its deadline", err)
	}
	if !c.Running(0) {
		t.Fatal("the blackholed member stopped")
	}
	c.HealMember(0)
	if got := get(t, cli, "k"); got != "v" {
		t.Fatalf("Get after HealMember = %q", got)
	}
}
