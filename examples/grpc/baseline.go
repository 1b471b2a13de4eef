package main

import (
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"google.golang.org/grpc/resolver"
)

// sdkOnceBuilder is the Nacos baseline: the resolver most code has, which
// subscribes once through nacos-sdk-go in Build and relies on the SDK for
// everything after that (its cache while disconnected, its redo after a
// reconnect). Build fails when the SDK's Subscribe fails; ResolveNow does
// nothing; every Build subscribes again (a new SDK callback per ClientConn
// and per idle exit).
type sdkOnceBuilder struct {
	client  naming_client.INamingClient
	service string
}

func (b *sdkOnceBuilder) Scheme() string { return "nacos" }

func (b *sdkOnceBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	r := &sdkOnceResolver{client: b.client, cc: cc}
	r.param = &vo.SubscribeParam{
		ServiceName: t.Endpoint(),
		SubscribeCallback: func(hosts []model.Instance, err error) {
			if err != nil {
				return
			}
			r.update(hosts)
		},
	}
	if err := b.client.Subscribe(r.param); err != nil {
		return nil, fmt.Errorf("nacos subscribe %s: %w", t.Endpoint(), err)
	}
	return r, nil
}

type sdkOnceResolver struct {
	client naming_client.INamingClient
	cc     resolver.ClientConn
	param  *vo.SubscribeParam

	mu     sync.Mutex
	closed bool
}

func (r *sdkOnceResolver) update(hosts []model.Instance) {
	var eps []resolver.Endpoint
	for _, h := range hosts {
		if !h.Healthy || !h.Enable {
			continue
		}
		addr := net.JoinHostPort(h.Ip, strconv.FormatUint(h.Port, 10))
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		_ = r.cc.UpdateState(resolver.State{Endpoints: eps})
	}
}

func (r *sdkOnceResolver) ResolveNow(resolver.ResolveNowOptions) {}

func (r *sdkOnceResolver) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	_ = r.client.Unsubscribe(r.param)
}
