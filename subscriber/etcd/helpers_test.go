package etcd_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// waitTimeout bounds every wait for a condition on real sockets and real
// time: generous, so that a slow machine (or -race) does not fail a test,
// but bounded, so that a bug does.
const waitTimeout = 20 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Every goroutine started by the tests, by etcd's server and by
		// its client must be gone once everything is closed. Some take a
		// while: connections between members (etcd's peer HTTP
		// transport, whose reads have a 5 s timeout) end up to 5 s after
		// the last member stopped, so FindLeaks waits longer than
		// goleak.Find alone.
		if err := subscribertest.FindLeaks(15 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fastPolicy keeps the Manager's loops jittered but quick, so that the
// tests converge in seconds.
var fastPolicy = rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}

// eventually polls cond every 10 ms until it holds or waitTimeout passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	subscribertest.Eventually(t, waitTimeout, what, cond)
}

func newCluster(t testing.TB, size int, opts ...etcdtest.Option) *etcdtest.Cluster {
	t.Helper()
	c, err := etcdtest.NewCluster(size, append([]etcdtest.Option{etcdtest.WithDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClient returns a client configured by etcdreg.ClientConfig for the
// given endpoints (every member by default), closed at cleanup.
func newClient(t testing.TB, c *etcdtest.Cluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := clientv3.New(etcdreg.ClientConfig(nil, endpoints...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func newRegistry(t testing.TB, cli *clientv3.Client, opts ...etcdreg.Option) *etcdreg.Registry {
	t.Helper()
	r, err := etcdreg.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func newManager(t testing.TB, reg subscriber.Registry, opts ...subscriber.Option) *subscriber.Manager {
	t.Helper()
	m, err := subscriber.New(reg, append([]subscriber.Option{subscriber.WithPolicy(fastPolicy)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// put writes inst under key as a provider would, without a lease,
// retrying while the cluster elects a leader (a write in flight when the
// leader dies fails with "request timed out", as in production).
func put(t testing.TB, cli *clientv3.Client, key subscriber.Key, inst subscriber.Instance) {
	t.Helper()
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, key, etcdreg.InstanceID(inst))
	if err != nil {
		t.Fatal(err)
	}
	v, err := etcdreg.EncodeInstance(inst)
	if err != nil {
		t.Fatal(err)
	}
	write(t, "put "+k, func(ctx context.Context) error {
		_, err := cli.Put(ctx, k, string(v))
		return err
	})
}

// del deletes the instance key of id.
func del(t testing.TB, cli *clientv3.Client, key subscriber.Key, id string) {
	t.Helper()
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, key, id)
	if err != nil {
		t.Fatal(err)
	}
	write(t, "delete "+k, func(ctx context.Context) error {
		_, err := cli.Delete(ctx, k)
		return err
	})
}

// write retries op (each try bounded by 5 s) until it succeeds or
// waitTimeout passes.
func write(t testing.TB, what string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := rebound.Retry(ctx, rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return op(ctx)
		})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func inst(ip string, port uint64) subscriber.Instance {
	return subscriber.Instance{IP: ip, Port: port, Weight: 1, Healthy: true, Enabled: true, Cluster: etcdreg.DefaultCluster}
}

// recorder is a listener that records every list it receives.
type recorder struct {
	mu    sync.Mutex
	lists [][]subscriber.Instance
}

func (r *recorder) listener(list []subscriber.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, list)
}

func (r *recorder) all() [][]subscriber.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists)
}

// last returns the addresses of the last list, sorted and joined by ",",
// and whether a list was delivered at all.
func (r *recorder) last() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lists) == 0 {
		return "", false
	}
	return addrs(r.lists[len(r.lists)-1]), true
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

// waitLast waits until the last delivered list has exactly the addresses
// want ("ip:port,ip:port" sorted; "" for an empty list).
func (r *recorder) waitLast(t testing.TB, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("the list %q", want), func() bool {
		got, ok := r.last()
		return ok && got == want
	})
}

func addrs(list []subscriber.Instance) string {
	out := make([]string, len(list))
	for i, in := range list {
		out[i] = fmt.Sprintf("%s:%d", in.IP, in.Port)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
