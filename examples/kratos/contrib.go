package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// contribRegistry is the baseline: a registry.Registrar and
// registry.Discovery that behave like kratos' contrib/registry/nacos, as
// read in its source (the module proxy does not serve it):
//
//   - Register calls RegisterInstance once per endpoint, in service
//     "<name>.<scheme>" with metadata kind and version, and relies on the
//     SDK's one-shot redo after a reconnect (a rejected redo is lost);
//   - Watch subscribes once: with Nacos down it returns the SDK's error
//     (kratos' resolver then fails the dial);
//   - the SDK callback sends into a channel of capacity 1 with a blocking
//     send (until the watcher stops); Next waits for it, then reads the
//     SDK (GetService);
//   - Stop unsubscribes the client from the service.
type contribRegistry struct {
	client naming_client.INamingClient
}

func (r *contribRegistry) Register(_ context.Context, si *registry.ServiceInstance) error {
	for _, ep := range si.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			return err
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return err
		}
		md := map[string]string{"kind": u.Scheme, "version": si.Version}
		for k, v := range si.Metadata {
			md[k] = v
		}
		if _, err := r.client.RegisterInstance(vo.RegisterInstanceParam{Ip: host, Port: p, ServiceName: si.Name + "." + u.Scheme,
			Weight: 100, Enable: true, Healthy: true, Ephemeral: true, Metadata: md, ClusterName: "DEFAULT", GroupName: "DEFAULT_GROUP"}); err != nil {
			return err
		}
	}
	return nil
}

func (r *contribRegistry) Deregister(_ context.Context, si *registry.ServiceInstance) error {
	for _, ep := range si.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		host, port, _ := net.SplitHostPort(u.Host)
		p, _ := strconv.ParseUint(port, 10, 16)
		if _, err := r.client.DeregisterInstance(vo.DeregisterInstanceParam{Ip: host, Port: p, ServiceName: si.Name + "." + u.Scheme,
			Cluster: "DEFAULT", GroupName: "DEFAULT_GROUP", Ephemeral: true}); err != nil {
			return err
		}
	}
	return nil
}

func (r *contribRegistry) GetService(_ context.Context, name string) ([]*registry.ServiceInstance, error) {
	res, err := r.client.SelectInstances(vo.SelectInstancesParam{ServiceName: name, GroupName: "DEFAULT_GROUP", HealthyOnly: true})
	if err != nil {
		return nil, err
	}
	return convert(name, res), nil
}

func (r *contribRegistry) Watch(ctx context.Context, name string) (registry.Watcher, error) {
	w := &contribWatcher{r: r, name: name, ch: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.param = &vo.SubscribeParam{ServiceName: name, GroupName: "DEFAULT_GROUP",
		// A blocking send, as the contrib registry's; here it also gives up
		// once the watcher is stopped, so the program leaves no SDK
		// goroutine blocked behind it.
		SubscribeCallback: func([]model.Instance, error) {
			select {
			case w.ch <- struct{}{}:
			case <-w.ctx.Done():
			}
		}}
	if err := r.client.Subscribe(w.param); err != nil {
		w.cancel()
		return nil, err
	}
	return w, nil
}

type contribWatcher struct {
	r      *contribRegistry
	name   string
	param  *vo.SubscribeParam
	ch     chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
}

func (w *contribWatcher) Next() ([]*registry.ServiceInstance, error) {
	select {
	case <-w.ctx.Done():
		return nil, w.ctx.Err()
	case <-w.ch:
	}
	svc, err := w.r.client.GetService(vo.GetServiceParam{ServiceName: w.name, GroupName: "DEFAULT_GROUP"})
	if err != nil {
		return nil, err
	}
	return convert(w.name, svc.Hosts), nil
}

func (w *contribWatcher) Stop() error {
	w.cancel()
	return w.r.client.Unsubscribe(w.param)
}

func convert(name string, hosts []model.Instance) []*registry.ServiceInstance {
	out := make([]*registry.ServiceInstance, 0, len(hosts))
	for _, h := range hosts {
		kind := h.Metadata["kind"]
		if kind == "" {
			kind = "grpc"
		}
		out = append(out, &registry.ServiceInstance{ID: h.InstanceId, Name: name, Version: h.Metadata["version"],
			Metadata: h.Metadata, Endpoints: []string{fmt.Sprintf("%s://%s", kind, net.JoinHostPort(h.Ip, strconv.FormatUint(h.Port, 10)))}})
	}
	return out
}
