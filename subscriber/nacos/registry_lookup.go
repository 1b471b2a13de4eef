package nacos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_cache"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

var (
	_ subscriber.Registry          = (*Registry)(nil)
	_ subscriber.ConnectionMonitor = (*Registry)(nil)
	_ subscriber.Reconciler        = (*Registry)(nil)
)

// errLookupUnsupported is the cause of the (permanent) error Lookup
// returns for a client that does not expose its configuration (the SDK's
// NamingClient does).
var errLookupUnsupported = errors.New("lookup needs the client's configuration (GetClientConfig, GetServerConfig, GetHttpAgent)")

// lookupConn is the adapter's own connection for Lookup, opened on first
// use: nacos-sdk-go's NamingClient has no call that reads a service from
// the server without going through (and filling) its cache.
type lookupConn struct {
	mu     sync.Mutex
	proxy  *naming_grpc.NamingGrpcProxy
	cancel context.CancelFunc
	closed bool
}

func (l *lookupConn) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.proxy != nil {
		l.proxy.CloseClient()
		l.cancel()
		l.proxy = nil
	}
}

// Lookup implements subscriber.Reconciler: one ServiceQueryRequest for
// key's instances, bypassing the SDK's cache, on a gRPC connection of the
// Registry's own (opened on first use, closed by Close). Disabled
// instances are left out. Errors read "nacos: lookup key: cause", wrapping
// ErrRejected for a rejection.
func (r *Registry) Lookup(ctx context.Context, key subscriber.Key) ([]subscriber.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.closed.Load() || r.clientClosed.Load() {
		return nil, errClosed
	}
	p, err := r.param(key)
	if err != nil {
		return nil, err
	}
	if err := r.connected(); err != nil {
		return nil, opError("lookup", key, err)
	}
	proxy, err := r.lookupProxy()
	if err != nil {
		return nil, err
	}
	svc, err := proxy.QueryInstancesOfService(p.ServiceName, p.GroupName, strings.Join(p.Clusters, ","), 0, false)
	if err != nil {
		return nil, opError("lookup", key, err)
	}
	if svc == nil || svc.LastRefTime == 0 {
		return nil, opError("lookup", key, ErrRejected)
	}
	hosts := slices.DeleteFunc(slices.Clone(svc.Hosts), func(h model.Instance) bool { return !h.Enable })
	return convert(hosts), nil
}

func (r *Registry) lookupProxy() (*naming_grpc.NamingGrpcProxy, error) {
	l := &r.lookup
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	if l.proxy != nil {
		return l.proxy, nil
	}
	ns := ""
	if r.cfg.nsSet {
		ns = r.cfg.namespace
	}
	proxy, cancel, err := newQueryProxy(r.client, ns, "lookup")
	if err != nil {
		return nil, err
	}
	l.proxy, l.cancel = proxy, cancel
	return proxy, nil
}

// newQueryProxy opens a naming gRPC connection of its own to client's
// servers, with client's configuration (namespace, when not empty,
// replacing the client's), for server queries that bypass the client's
// cache. Close it with CloseClient and cancel. op names the caller in
// errors. A client that does not expose its configuration (the SDK's
// NamingClient does) gets a permanent errLookupUnsupported.
func newQueryProxy(client naming_client.INamingClient, namespace, op string) (*naming_grpc.NamingGrpcProxy, context.CancelFunc, error) {
	nc, ok := client.(interface {
		GetClientConfig() (constant.ClientConfig, error)
		GetServerConfig() ([]constant.ServerConfig, error)
		GetHttpAgent() (http_agent.IHttpAgent, error)
	})
	if !ok {
		return nil, nil, rebound.Permanent(errLookupUnsupported)
	}
	cc, err := nc.GetClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("nacos: %s: %w", op, err)
	}
	servers, err := nc.GetServerConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("nacos: %s: %w", op, err)
	}
	agent, err := nc.GetHttpAgent()
	if err != nil {
		return nil, nil, fmt.Errorf("nacos: %s: %w", op, err)
	}
	if namespace != "" {
		cc.NamespaceId = namespace
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := nacos_server.NewNacosServer(ctx, servers, cc, agent, cc.TimeoutMs, cc.Endpoint, nil)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("nacos: %s: %w", op, err)
	}
	// The holder is never written to: this connection subscribes to
	// nothing, so no push arrives, and its replies are not stored.
	holder := naming_cache.NewServiceInfoHolder(cc.NamespaceId, cc.CacheDir, true, true)
	proxy, err := naming_grpc.NewNamingGrpcProxy(ctx, cc, srv, holder)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("nacos: %s: %w", op, err)
	}
	return proxy, cancel, nil
}
