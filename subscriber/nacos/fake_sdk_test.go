package nacos_test

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

type callbackPtr = *func([]model.Instance, error)

// fakeSDK mimics what nacos-sdk-go v2.3.2's NamingClient does with
// subscriptions (naming_client.go, subscribe_callback.go,
// naming_proxy_delegate.go, service_info_holder.go,
// connection_event_listener.go, rpc_client.go):
//   - Subscribe appends &param.SubscribeCallback to the key's callback list
//     without de-duplication and caches the key for redo, both BEFORE
//     sending; it sends nothing if the key is cached for redo and its list
//     is cached; while disconnected it fails with "client not connected".
//   - A reply or push is stored if its lastRefTime is newer than the
//     cached one (an empty list only with UpdateCacheWhenEmpty), and runs
//     every callback of the key if the key was new or the list changed.
//   - A rejection in the handler's own response type (TPS control) is
//     returned as success with an empty service: nothing is stored.
//   - GetService reads the cache; on a miss it sends a subscribe request
//     (without adding a callback) and returns the reply.
//   - Unsubscribe removes the one pointer, drops the cached list and the
//     redo entry, and sends an unsubscribe.
//   - redo re-sends every redo key once, skipping failures.
type fakeSDK struct {
	naming_client.INamingClient // unused methods panic

	mu          sync.Mutex
	connected   bool
	closed      bool
	emptyCached bool
	namespace   string // the client's NamespaceId
	callbacks   map[string][]callbackPtr
	everSub     map[string]bool // keys in the SDK's callback map (never removed)
	redoKeys    map[string]bool
	cache       map[string]model.Service
	server      map[string][]model.Instance // the server's truth
	serverSub   map[string]bool             // the server's subscriptions of this client
	ref         uint64                      // the server's lastRefTime clock
	sent        map[string]int              // subscribe requests that reached the server
	unsent      map[string]int              // unsubscribe requests
	failNext    int                         // server errors for the next subscribe requests
	rejectNext  int                         // TPS rejections for the next subscribe requests
	reject      map[string]bool             // keys whose subscribe requests are all rejected
}

func newFakeSDK() *fakeSDK {
	return &fakeSDK{
		connected:   true,
		emptyCached: true,
		callbacks:   map[string][]callbackPtr{},
		everSub:     map[string]bool{},
		redoKeys:    map[string]bool{},
		cache:       map[string]model.Service{},
		server:      map[string][]model.Instance{},
		serverSub:   map[string]bool{},
		sent:        map[string]int{},
		unsent:      map[string]int{},
		reject:      map[string]bool{},
	}
}

func sdkKey(group, service string, clusters []string) string {
	if group == "" {
		group = "DEFAULT_GROUP"
	}
	return group + "@@" + service + "@@" + strings.Join(clusters, ",")
}

func (f *fakeSDK) GetClientConfig() (constant.ClientConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return constant.ClientConfig{UpdateCacheWhenEmpty: f.emptyCached, NamespaceId: f.namespace}, nil
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

// requestLocked is one subscribe request at the server: the reply's
// service (zero when rejected) or an error.
func (f *fakeSDK) requestLocked(k string) (model.Service, error) {
	if err := f.errLocked(); err != nil {
		return model.Service{}, err
	}
	f.sent[k]++
	if f.failNext > 0 {
		f.failNext--
		return model.Service{}, errors.New("server error 500")
	}
	if f.rejectNext > 0 || f.reject[k] {
		if f.rejectNext > 0 {
			f.rejectNext--
		}
		return model.Service{}, nil // SubscribeServiceResponse{success false}: nil error
	}
	f.serverSub[k] = true
	f.ref++
	name := strings.Split(k, "@@")[1]
	return model.Service{Name: name, Hosts: slices.Clone(f.server[k]), LastRefTime: f.ref}, nil
}

func (f *fakeSDK) Subscribe(p *vo.SubscribeParam) error {
	if p.GroupName == "" {
		p.GroupName = "DEFAULT_GROUP"
	}
	k := sdkKey(p.GroupName, p.ServiceName, p.Clusters)
	f.mu.Lock()
	f.callbacks[k] = append(f.callbacks[k], &p.SubscribeCallback)
	f.everSub[k] = true
	subscribed := f.redoKeys[k]
	f.redoKeys[k] = true
	svc, cached := f.cache[k]
	if !subscribed || !cached {
		var err error
		if svc, err = f.requestLocked(k); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	f.mu.Unlock()
	f.process(k, svc)
	return nil
}

// process is ServiceInfoHolder.ProcessService: it runs the callbacks
// outside the lock, in the calling goroutine.
func (f *fakeSDK) process(k string, svc model.Service) {
	if svc.LastRefTime == 0 {
		return // a rejection's zero service (stored under another key)
	}
	f.mu.Lock()
	if len(svc.Hosts) == 0 && !f.emptyCached {
		f.mu.Unlock()
		return
	}
	old, ok := f.cache[k]
	if ok && old.LastRefTime >= svc.LastRefTime {
		f.mu.Unlock()
		return
	}
	f.cache[k] = svc
	changed := !ok || !slices.EqualFunc(old.Hosts, svc.Hosts, func(a, b model.Instance) bool { return a.Ip == b.Ip && a.Port == b.Port })
	cbs := slices.Clone(f.callbacks[k])
	f.mu.Unlock()
	if changed {
		for _, cb := range cbs {
			(*cb)(svc.Hosts, nil) // the slice it stored, as the SDK does
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
	if !f.everSub[k] {
		return nil
	}
	delete(f.cache, k)
	delete(f.redoKeys, k)
	if err := f.errLocked(); err != nil {
		return err
	}
	f.unsent[k]++
	delete(f.serverSub, k)
	return nil
}

func (f *fakeSDK) GetService(p vo.GetServiceParam) (model.Service, error) {
	k := sdkKey(p.GroupName, p.ServiceName, p.Clusters)
	f.mu.Lock()
	svc, ok := f.cache[k]
	if ok {
		f.mu.Unlock()
		return svc, nil
	}
	f.redoKeys[k] = true
	svc, err := f.requestLocked(k)
	f.mu.Unlock()
	if err != nil {
		return model.Service{}, err
	}
	f.process(k, svc)
	return svc, nil
}

func (f *fakeSDK) ServerHealthy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected && !f.closed
}

// GetAllServicesInfo is the adapter's probe for a closed client: it
// fails like a request (SHUTDOWN after CloseClient, UNHEALTHY while
// disconnected).
func (f *fakeSDK) GetAllServicesInfo(vo.GetAllServiceInfoParam) (model.ServiceList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errLocked(); err != nil {
		return model.ServiceList{}, err
	}
	return model.ServiceList{}, nil
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
	f.ref++
	svc := model.Service{Name: strings.Split(k, "@@")[1], Hosts: slices.Clone(hosts), LastRefTime: f.ref}
	f.mu.Unlock()
	if push {
		f.process(k, svc)
	}
}

// restartSilently makes the server forget this client's subscriptions
// without the client noticing.
func (f *fakeSDK) restartSilently() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.serverSub)
}

// restart is a server restart: the connection drops (the server forgets
// the client's subscriptions), then comes back and the SDK runs its redo.
// Call setConnected(false) before and redo after.
func (f *fakeSDK) redo() {
	f.mu.Lock()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range f.redoKeys {
			if !yield(k) {
				return
			}
		}
	})
	f.mu.Unlock()
	for _, k := range keys {
		f.mu.Lock()
		svc, err := f.requestLocked(k)
		f.mu.Unlock()
		if err == nil {
			f.process(k, svc)
		}
	}
}

func (f *fakeSDK) setConnected(c bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected = c
	if !c {
		clear(f.serverSub) // the server forgets a broken connection's subscriptions
	}
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

func (f *fakeSDK) totalRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.sent {
		n += v
	}
	for _, v := range f.unsent {
		n += v
	}
	return n
}

func (f *fakeSDK) held(k string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.serverSub[k]
}

func host(ip string) model.Instance {
	return model.Instance{Ip: ip, Port: 8080, Weight: 1, Healthy: true, Enable: true, Ephemeral: true,
		ClusterName: "DEFAULT", Metadata: map[string]string{"v": "1"}}
}

// processLate is ProcessService for a reply that loses a race: like
// nacos-sdk-go v2.3.2 it loads the cached service, compares, stores and
// runs the callbacks without a lock, so a reply (a redo's, a re-query's)
// that read the cache before a newer push was processed in full
// (beforeStore) is stored over it, or, stored before the push read the
// cache, runs the callbacks after it (beforeCallbacks). The callbacks run
// if the reply's list differs from what it read.
func (f *fakeSDK) processLate(k string, svc model.Service, beforeStore, beforeCallbacks func()) {
	f.mu.Lock()
	old, ok := f.cache[k]
	f.mu.Unlock()
	beforeStore()
	if ok && old.LastRefTime >= svc.LastRefTime {
		return
	}
	f.mu.Lock()
	f.cache[k] = svc
	changed := !ok || !slices.EqualFunc(old.Hosts, svc.Hosts, func(a, b model.Instance) bool { return a.Ip == b.Ip && a.Port == b.Port })
	cbs := slices.Clone(f.callbacks[k])
	f.mu.Unlock()
	beforeCallbacks()
	if changed {
		for _, cb := range cbs {
			(*cb)(svc.Hosts, nil) // the slice it stored, as the SDK does
		}
	}
}

// reply is the server's answer to a request for k now (a redo or a
// query), without sending it: pass it to processLate.
func (f *fakeSDK) reply(k string) model.Service {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ref++
	return model.Service{Name: strings.Split(k, "@@")[1], Hosts: slices.Clone(f.server[k]), LastRefTime: f.ref}
}
