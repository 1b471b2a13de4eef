package nacos_test

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

type callbackPtr = *func([]model.Instance, error)

// fakeSDK mimics what nacos-sdk-go v2.3.2's NamingClient does with
// subscriptions (naming_client.go, subscribe_callback.go,
// naming_proxy_delegate.go, connection_event_listener.go):
//   - Subscribe appends &param.SubscribeCallback to the key's callback list
//     without de-duplication and caches the key for redo, both BEFORE
//     sending; it sends nothing if the key is cached for redo and its list
//     is cached; while disconnected it fails with "client not connected".
//   - A reply or push updates the cached list and, if it changed (or was
//     not cached), runs every callback of the key.
//   - Unsubscribe removes the one pointer, drops the cached list and the
//     redo entry, and sends an unsubscribe.
type fakeSDK struct {
	naming_client.INamingClient // unused methods panic

	mu        sync.Mutex
	connected bool
	closed    bool
	callbacks map[string][]callbackPtr
	redo      map[string]bool
	cache     map[string][]model.Instance
	server    map[string][]model.Instance // the server's truth
	serverSub map[string]bool             // the server's subscriptions of this client
	sent      map[string]int              // subscribe requests that reached the server
	failNext  int                         // server errors for the next subscribe requests
}

func newFakeSDK() *fakeSDK {
	return &fakeSDK{
		connected: true,
		callbacks: map[string][]callbackPtr{},
		redo:      map[string]bool{},
		cache:     map[string][]model.Instance{},
		server:    map[string][]model.Instance{},
		serverSub: map[string]bool{},
		sent:      map[string]int{},
	}
}

func sdkKey(group, service string, clusters []string) string {
	if group == "" {
		group = "DEFAULT_GROUP"
	}
	return group + "@@" + service + "@@" + strings.Join(clusters, ",")
}

func (f *fakeSDK) errLocked() error {
	if f.closed {
		return errors.New("client not connected, current status:SHUTDOWN")
	}
	if !f.connected {
		return errors.New("client not connected, current status:UNHEALTHY")
	}
	return nil
}

func (f *fakeSDK) Subscribe(p *vo.SubscribeParam) error {
	if p.GroupName == "" {
		p.GroupName = "DEFAULT_GROUP"
	}
	k := sdkKey(p.GroupName, p.ServiceName, p.Clusters)
	f.mu.Lock()
	f.callbacks[k] = append(f.callbacks[k], &p.SubscribeCallback)
	subscribed := f.redo[k]
	f.redo[k] = true
	_, cached := f.cache[k]
	if subscribed && cached {
		f.mu.Unlock()
		return nil
	}
	if err := f.errLocked(); err != nil {
		f.mu.Unlock()
		return err
	}
	f.sent[k]++
	if f.failNext > 0 {
		f.failNext--
		f.mu.Unlock()
		return errors.New("server error 500")
	}
	f.serverSub[k] = true
	hosts := slices.Clone(f.server[k])
	f.mu.Unlock()
	f.process(k, hosts)
	return nil
}

// process is ServiceInfoHolder.ProcessService: it runs the callbacks
// outside the lock, in the calling goroutine.
func (f *fakeSDK) process(k string, hosts []model.Instance) {
	f.mu.Lock()
	old, ok := f.cache[k]
	f.cache[k] = hosts
	changed := !ok || !slices.EqualFunc(old, hosts, func(a, b model.Instance) bool { return a.Ip == b.Ip && a.Port == b.Port })
	cbs := slices.Clone(f.callbacks[k])
	f.mu.Unlock()
	if changed {
		for _, cb := range cbs {
			(*cb)(hosts, nil)
		}
	}
}

func (f *fakeSDK) Unsubscribe(p *vo.SubscribeParam) error {
	k := sdkKey(p.GroupName, p.ServiceName, p.Clusters)
	f.mu.Lock()
	defer f.mu.Unlock()
	cbs := f.callbacks[k][:0:0]
	for _, cb := range f.callbacks[k] {
		if cb != &p.SubscribeCallback {
			cbs = append(cbs, cb)
		}
	}
	f.callbacks[k] = cbs
	delete(f.cache, k)
	delete(f.redo, k)
	if err := f.errLocked(); err != nil {
		return err
	}
	delete(f.serverSub, k)
	return nil
}

func (f *fakeSDK) GetService(p vo.GetServiceParam) (model.Service, error) {
	k := sdkKey(p.GroupName, p.ServiceName, p.Clusters)
	f.mu.Lock()
	hosts, ok := f.cache[k]
	f.mu.Unlock()
	if ok {
		return model.Service{Hosts: hosts}, nil
	}
	return model.Service{}, errors.New("not cached (the fake does not subscribe here)")
}

func (f *fakeSDK) ServerHealthy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected && !f.closed
}

func (f *fakeSDK) CloseClient() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// setServer changes the server's list and pushes it if the client is
// connected and subscribed on the server.
func (f *fakeSDK) setServer(k string, hosts ...model.Instance) {
	f.mu.Lock()
	f.server[k] = hosts
	push := f.connected && f.serverSub[k]
	f.mu.Unlock()
	if push {
		f.process(k, slices.Clone(hosts))
	}
}

// restart makes the server forget this client's subscriptions; the
// client's redo "fails silently" (nothing is re-sent).
func (f *fakeSDK) restartSilently() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.serverSub)
}

func (f *fakeSDK) setConnected(c bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected = c
}

func (f *fakeSDK) numCallbacks(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.callbacks[k])
}

func (f *fakeSDK) numSent(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[k]
}

func host(ip string) model.Instance {
	return model.Instance{Ip: ip, Port: 8080, Weight: 1, Healthy: true, Enable: true, Ephemeral: true,
		ClusterName: "DEFAULT", Metadata: map[string]string{"v": "1"}}
}
