package nacostest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }

// newClient connects a real nacos-sdk-go naming client to srv. It is closed
// when the test ends.
func newClient(t *testing.T, srv *nacostest.Server, namespace string) naming_client.INamingClient {
	t.Helper()
	cc := nacostest.ClientConfig(t)
	cc.NamespaceId = namespace
	c, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cc,
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		t.Fatalf("NewNamingClient: %v", err)
	}
	t.Cleanup(c.CloseClient)
	// The SDK handles its start-up CONNECTED event asynchronously and, if
	// its connection listener is registered by then, re-sends ("redoes")
	// the registrations and subscriptions it has cached at that moment,
	// possibly after newer ones: a registration made right after
	// NewNamingClient can be overwritten by a stale copy, an unsubscription
	// undone. Nothing observable marks the end of that redo, so wait for
	// the server to be quiet for a moment before the test uses the client.
	waitQuiet(t, srv, 50*time.Millisecond)
	return c
}

// waitQuiet waits until srv has received no request for quiet, failing the
// test after waitTimeout.
func waitQuiet(t *testing.T, srv *nacostest.Server, quiet time.Duration) {
	t.Helper()
	last, since := srv.Stats().TotalRequests, time.Now()
	eventually(t, "the server to be quiet for "+quiet.String(), func() bool {
		if n := srv.Stats().TotalRequests; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

// newServer starts a server that is closed when the test ends.
func newServer(t *testing.T, opts ...nacostest.Option) *nacostest.Server {
	t.Helper()
	srv, err := nacostest.NewServer(opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

const waitTimeout = 10 * time.Second

// eventually polls cond every 10 ms until it holds, failing the test after
// waitTimeout. Socket tests use real time: the SDK's goroutines cannot run
// under a fake clock.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	subscribertest.Eventually(t, waitTimeout, what, cond)
}

// recorder records what a subscription callback receives.
type recorder struct {
	mu    sync.Mutex
	calls int
	last  []model.Instance
	errs  []error
}

func (r *recorder) callback(instances []model.Instance, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.last = slices.Clone(instances)
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

func (r *recorder) snapshot() (int, []model.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, slices.Clone(r.last)
}

// waitAddrs waits until the last delivered list is exactly want
// ("ip:port", any order; none for an empty list).
func (r *recorder) waitAddrs(t *testing.T, want ...string) []model.Instance {
	t.Helper()
	slices.Sort(want)
	var got []model.Instance
	eventually(t, fmt.Sprintf("callback with instances %v", want), func() bool {
		calls, last := r.snapshot()
		got = last
		return calls > 0 && slices.Equal(addrs(last), want)
	})
	return got
}

func addrs(ins []model.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, fmt.Sprintf("%s:%d", in.Ip, in.Port))
	}
	slices.Sort(out)
	return out
}

func registerParam(service, ip string, port uint64) vo.RegisterInstanceParam {
	return vo.RegisterInstanceParam{
		ServiceName: service,
		Ip:          ip,
		Port:        port,
		Weight:      1,
		Enable:      true,
		Healthy:     true,
		Ephemeral:   true,
	}
}

func mustRegister(t *testing.T, c naming_client.INamingClient, p vo.RegisterInstanceParam) {
	t.Helper()
	ok, err := c.RegisterInstance(p)
	if err != nil || !ok {
		t.Fatalf("RegisterInstance(%s %s:%d) = %v, %v", p.ServiceName, p.Ip, p.Port, ok, err)
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

func TestNewClientConfigRejectsEmptyCacheDir(t *testing.T) {
	_, err := nacostest.NewClientConfig("")
	var ae *rebound.ArgumentError
	if !errors.As(err, &ae) || ae.Arg != "cacheDir" || !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("NewClientConfig(\"\") = %v, want an ArgumentError naming cacheDir", err)
	}
	cfg, err := nacostest.NewClientConfig("/some/dir")
	if err != nil || cfg.CacheDir != "/some/dir" || !cfg.UpdateCacheWhenEmpty || !cfg.NotLoadCacheAtStart {
		t.Fatalf("NewClientConfig = %+v, %v", cfg, err)
	}
}
